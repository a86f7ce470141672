package reconcile

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/pullmanager"
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

// A private image one pod pulled with its imagePullSecret is not another
// pod's to run (kubelet's KubeletEnsureSecretPulledImages): under
// IfNotPresent a pod without the secret pulls it itself and fails as it
// should without credentials; under Never it is told the image is not
// present, kubelet's message; a pod with the same secret runs it without a
// pull. NeverVerify is the old behaviour, everyone's.
func TestAPresentImageIsOnlyForThePodsThatCouldPullIt(t *testing.T) {
	const image, password = "registry.example.com/team/app:1", "s3cr3t-team"
	auth := base64.StdEncoding.EncodeToString([]byte("team:" + password))
	pod := func(uid string, secret bool, policy corev1.PullPolicy) *corev1.Pod {
		p := testPod(corev1.Container{Name: "app", Image: image, ImagePullPolicy: policy, Command: []string{"x"}})
		p.UID, p.Name = types.UID(uid), "p-"+uid
		if secret {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		}
		return p
	}
	for _, tt := range []struct {
		policy     pullmanager.Policy
		wantTenant string // start error of the pods without the secret
	}{
		{pullmanager.DefaultPolicy, "ErrImagePull"},
		{pullmanager.NeverVerify, ""},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			rt := &authRegistry{Runtime: fakecri.New(), password: password}
			objs := newFakeObjects()
			objs.putSecret("regcred", corev1.SecretTypeDockerConfigJson, map[string]string{
				corev1.DockerConfigJsonKey: fmt.Sprintf(`{"auths":{"registry.example.com":{"auth":%q}}}`, auth)})
			dir := t.TempDir()
			pulls, err := pullmanager.New(pullmanager.Config{Dir: filepath.Join(dir, pullmanager.DirName), Policy: tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(rt, &eventLog{}, Config{NodeName: "n1", DataDir: dir, Objects: objs, ImagePulls: pulls})
			if err != nil {
				t.Fatal(err)
			}
			if got := startResult(syncOnce(t, m, pod("owner", true, corev1.PullIfNotPresent))).Error; got != "" {
				t.Fatalf("the pod with the secret: %q", got)
			}

			res := syncOnce(t, m, pod("tenant", false, corev1.PullIfNotPresent))
			if got := startResult(res).Error; got != tt.wantTenant {
				t.Errorf("IfNotPresent without the secret: %q, want %q (%v)", got, tt.wantTenant, res.ActionResults())
			}
			res = syncOnce(t, m, pod("never", false, corev1.PullNever))
			want, wantMsg := tt.wantTenant, ""
			if want != "" {
				want, wantMsg = "ErrImageNeverPull", `Container image "`+image+`" is not present with pull policy of Never`
			}
			if got := startResult(res); got.Error != want || (want != "" && got.Message != wantMsg) {
				t.Errorf("Never without the secret: %q %q, want %q %q", got.Error, got.Message, want, wantMsg)
			}
			pullsBefore := len(rt.offered)
			if got := startResult(syncOnce(t, m, pod("friend", true, corev1.PullIfNotPresent))).Error; got != "" {
				t.Errorf("a pod with the same secret: %q", got)
			}
			if len(rt.offered) != pullsBefore {
				t.Errorf("a pod with the secret that pulled the image pulled it again (%d pulls)", len(rt.offered)-pullsBefore)
			}
		})
	}
}
