package consumer

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A durable consumer kept on one server is taken for lost only on the
// stream leader's word that its server is silent, never because API
// requests time out, which they also do on a live server under overload.
func TestSilentPeer(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	since := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	cluster := &jetstream.ClusterInfo{Leader: "s1", LeaderSince: since(time.Minute), Replicas: []*jetstream.PeerInfo{
		{Name: "s2", Current: true, Active: 300 * time.Millisecond},
		{Name: "s3", Current: false, Active: 6 * time.Second},
	}}
	// What a leader elected after its predecessor died reports of it: it
	// never heard from it.
	newLeader := func(led time.Duration) *jetstream.ClusterInfo {
		return &jetstream.ClusterInfo{Leader: "s2", LeaderSince: since(led), Replicas: []*jetstream.PeerInfo{
			{Name: "s1", Current: false, Active: 0, Lag: 2},
			{Name: "s3", Current: true, Active: 900 * time.Millisecond},
		}}
	}
	for _, tc := range []struct {
		name    string
		cluster *jetstream.ClusterInfo
		server  string
		gone    bool
	}{
		{"its server heartbeats", cluster, "s2", false},
		{"its server is silent", cluster, "s3", true},
		{"its server leads the stream", cluster, "s1", false},
		{"its server unknown, one peer silent", cluster, "", true},
		{"its server taken offline", &jetstream.ClusterInfo{Leader: "s1", Replicas: []*jetstream.PeerInfo{{Name: "s2", Offline: true}}}, "s2", true},
		{"lagging but heard from", &jetstream.ClusterInfo{Leader: "s1", Replicas: []*jetstream.PeerInfo{{Name: "s2", Lag: 5000, Active: time.Second}}}, "s2", false},
		{"never heard from by a leader of 6 s", newLeader(6 * time.Second), "s1", true},
		{"not yet heard from by a leader of 1 s", newLeader(time.Second), "s1", false},
		{"no cluster", nil, "s2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := silentPeer(tc.cluster, now, tc.server)
			if (err != nil) != tc.gone {
				t.Errorf("silentPeer(%s) = %v, want gone %t", tc.server, err, tc.gone)
			}
		})
	}
}
