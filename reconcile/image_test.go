package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/test/fakecri"
)

// authRegistry serves its images (registry.example.com's) only for the
// password it holds, and records the passwords each pull offered.
type authRegistry struct {
	*fakecri.Runtime
	password string
	mu       sync.Mutex
	offered  []string
}

func (r *authRegistry) PullImage(ctx context.Context, im *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.offered = append(r.offered, auth.GetPassword())
	r.mu.Unlock()
	if strings.HasPrefix(im.Image, "registry.example.com/") && auth.GetPassword() != r.password {
		return "", fmt.Errorf("pulling %s: 401 Unauthorized", im.Image)
	}
	return r.Runtime.PullImage(ctx, im, auth, sc)
}

type staticCredentials map[string][]*runtimeapi.AuthConfig

func (s staticCredentials) Lookup(image string) []*runtimeapi.AuthConfig { return s[image] }

func TestPullTriesEachCredentialInOrderAndNeverShowsOne(t *testing.T) {
	const image = "registry.example.com/app:1"
	creds := staticCredentials{image: {
		{Username: "old", Password: "s3cr3t-old"},
		{Username: "new", Password: "s3cr3t-new"},
	}}
	for _, tt := range []struct {
		name     string
		accepted string
		wantErr  string
	}{
		{"the second works", "s3cr3t-new", ""},
		{"none works", "s3cr3t-other", "ErrImagePull"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt := &authRegistry{Runtime: fakecri.New(), password: tt.accepted}
			var logs bytes.Buffer
			events := &eventLog{}
			m, err := New(rt, events, Config{NodeName: "n1", DataDir: t.TempDir(), Credentials: creds,
				Logger: zerolog.New(&logs).Level(zerolog.TraceLevel)})
			if err != nil {
				t.Fatal(err)
			}
			pod := testPod(corev1.Container{Name: "app", Image: image, Command: []string{"x"}})
			res := syncOnce(t, m, pod)
			if got := startResult(res).Error; got != tt.wantErr {
				t.Fatalf("start: %q, want %q (%v)", got, tt.wantErr, res.ActionResults())
			}
			if got := strings.Join(rt.offered, ","); got != "s3cr3t-old,s3cr3t-new" {
				t.Errorf("credentials offered in the order %q, want old then new", got)
			}
			wire, _ := json.Marshal(res.ActionResults())
			evs, _ := json.Marshal(events.events)
			st, _ := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
			status, _ := json.Marshal(m.ToAPIStatus(pod, st))
			for what, text := range map[string]string{"log": logs.String(), "results": string(wire), "events": string(evs), "status": string(status)} {
				if strings.Contains(text, "s3cr3t") {
					t.Errorf("the %s show a credential: %s", what, text)
				}
			}
			if tt.wantErr != "" && !strings.Contains(string(wire), "401 Unauthorized; ") {
				t.Errorf("results %s: want both pull errors on one line", wire)
			}
		})
	}
}
