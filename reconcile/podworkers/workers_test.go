package podworkers

import (
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/pleg"
)

func TestNewRefusesWhatCannotWork(t *testing.T) {
	syncer := &scriptedManager{running: map[string]bool{}}
	relister, err := pleg.New(syncer, discard{}, pleg.Config{Node: "n1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	valid := Config{Node: "n1"}
	for _, tc := range []struct {
		name   string
		syncer PodSyncer
		cache  *pleg.Relister
		emit   kubecontainer.Emitter
		status StatusSink
		cfg    Config
	}{
		{"no pod syncer", nil, relister, discard{}, discard{}, valid},
		{"no relister", syncer, nil, discard{}, discard{}, valid},
		{"no emitter", syncer, relister, nil, discard{}, valid},
		{"no status sink", syncer, relister, discard{}, nil, valid},
		{"no node", syncer, relister, discard{}, discard{}, Config{}},
		{"node not a DNS-1123 label", syncer, relister, discard{}, discard{}, Config{Node: "n_1"}},
		{"negative workers", syncer, relister, discard{}, discard{}, Config{Node: "n1", Workers: -1}},
		{"resync under 1s", syncer, relister, discard{}, discard{}, Config{Node: "n1", ResyncPeriod: time.Millisecond}},
		{"negative gc period", syncer, relister, discard{}, discard{}, Config{Node: "n1", GCPeriod: -time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w, err := New(tc.syncer, tc.cache, tc.emit, tc.status, tc.cfg); !errors.Is(err, ErrInvalidConfig) || w != nil {
				t.Errorf("New = %v, %v; want nil, ErrInvalidConfig", w, err)
			}
		})
	}
	if _, err := New(syncer, relister, discard{}, discard{}, valid); err != nil {
		t.Errorf("New with the defaults: %v", err)
	}
}
