package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/testimages"
)

// imagePodJSON is an apply intent for a one-container pod that runs image
// with its own entrypoint and cmd, never restarted.
func imagePodJSON(uid, image string) string {
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":5,
	      "containers":[{"name":"app","image":%q}]}}}`, strings.ToLower(uid), uid, image)
}

// A pod whose image is in a registry behind basic auth, on a node started
// with --image-credentials for it, at trace level: the embedded runtime
// pulls it with the credentials and the pod runs the image's entrypoint to
// its end; the password shows nowhere in the process's log, the results or
// the status.
func TestImageCredentialsAreNeverLogged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the embedded runtime runs images as root only")
	}
	const password = "e2e-s3cr3t-never-logged"
	registry := testimages.Serve(t, map[string]v1.Image{"team/layered:1": testimages.Must(t, testimages.Layered)},
		testimages.WithBasicAuth("jetlet", password))
	creds := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("jetlet:" + password))
	if err := os.WriteFile(creds, []byte(fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, registry, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, shortDir(t), "", "--image-credentials", creds, "--log-level", "trace")
	n.publish("private", imagePodJSON("private", registry+"/team/layered:1"))
	if r := n.results("private", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s %+v", r.Outcome, r.Error, r.Actions)
	}
	st := n.waitStatus("private", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	results, _ := json.Marshal(readMsgs[schemas.SyncResult](t, n.js, schemas.StreamResults, "jetlet.result.n1.private"))
	status, _ := json.Marshal(st)
	for what, text := range map[string]string{
		"jetlet's log": n.proc.Logs(),
		"results":      string(results),
		"status":       string(status),
	} {
		if strings.Contains(text, password) || strings.Contains(text, auth) {
			t.Errorf("the %s show the credential", what)
		}
	}
}

// An image no registry has is ErrImagePull, then ImagePullBackOff, as on
// containerd; the pod never starts.
func TestAMissingImageIsErrImagePullThenBackOff(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the embedded runtime runs images as root only")
	}
	registry := testimages.Serve(t, map[string]v1.Image{})
	n := startNode(t, shortDir(t), "")
	n.publish("missing", imagePodJSON("missing", registry+"/nope/doesnotexist:9.9"))
	n.waitEvent("missing", schemas.EventImagePullFailed, 30*time.Second, nil)
	st := n.waitStatus("missing", 60*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].Reason == "ImagePullBackOff"
	})
	if st.Phase != schemas.PhasePending || st.Containers[0].Ready {
		t.Errorf("a pod whose image cannot be pulled: phase %s, ready %v", st.Phase, st.Containers[0].Ready)
	}
}

// A private image one tenant's pod pulled with its imagePullSecret is not
// another tenant's to run (kubelet's KubeletEnsureSecretPulledImages, on by
// default): a pod of another namespace without credentials, IfNotPresent,
// must pull it itself and fails (ErrImagePull); with Never it is told the
// image is not present (ErrImageNeverPull, kubelet's message). The record
// of the pull (kubelet's format, under the data dir, without the password)
// survives a restart of jetlet: after it the tenant is still refused and a
// pod with the secret runs the image without pulling it (pull policy Never).
func TestAPrivateImageIsNotAnotherTenantsToRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the embedded runtime runs images as root only")
	}
	const password = "tenant-s3cr3t-51d9"
	registry := testimages.Serve(t, map[string]v1.Image{"team/layered:1": testimages.Must(t, testimages.Layered)},
		testimages.WithBasicAuth("jetlet", password))
	image := registry + "/team/layered:1"
	n := startNode(t, shortDir(t), "")
	auth := base64.StdEncoding.EncodeToString([]byte("jetlet:" + password))
	n.putSecretOfType(t, "regcred", corev1.SecretTypeDockerConfigJson, map[string]string{
		corev1.DockerConfigJsonKey: fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, registry, auth),
	})
	pod := func(uid, namespace string, policy corev1.PullPolicy, secret bool) string {
		return editPod(t, imagePodJSON(uid, image), func(p *corev1.Pod) {
			p.Namespace = namespace
			p.Spec.Containers[0].ImagePullPolicy = policy
			if secret {
				p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
			}
		})
	}
	refusedNever := func(uid string) {
		t.Helper()
		st := n.waitStatus(uid, 60*time.Second, func(st *schemas.PodStatus) bool {
			return len(st.Containers) == 1 && st.Containers[0].Reason == "ErrImageNeverPull"
		})
		if want := fmt.Sprintf("Container image %q is not present with pull policy of Never", image); st.Containers[0].Message != want {
			t.Errorf("%s: message %q, want %q", uid, st.Containers[0].Message, want)
		}
	}

	n.publish("owner", pod("owner", "default", corev1.PullIfNotPresent, true))
	n.waitStatus("owner", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })

	n.publish("tenant", pod("tenant", "tenant-b", corev1.PullIfNotPresent, false))
	failed := n.waitEvent("tenant", schemas.EventImagePullFailed, 60*time.Second, nil)
	if !strings.Contains(failed.Message, "Failed to pull image") {
		t.Errorf("tenant's ImagePullFailed: %q", failed.Message)
	}
	n.waitStatus("tenant", 60*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && (st.Containers[0].Reason == "ErrImagePull" || st.Containers[0].Reason == "ImagePullBackOff")
	})
	n.publish("tenant-never", pod("tenant-never", "tenant-b", corev1.PullNever, false))
	refusedNever("tenant-never")

	records, _ := filepath.Glob(filepath.Join(n.dataDir, "image_manager", "pulled", "sha256-*"))
	if len(records) != 1 {
		t.Fatalf("pulled records %v, want one", records)
	}
	record, err := os.ReadFile(records[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(record), `"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1"`) ||
		!strings.Contains(string(record), `"namespace":"default","name":"regcred"`) {
		t.Errorf("pulled record %s: want kubelet's ImagePulledRecord naming default/regcred", record)
	}
	if strings.Contains(string(record), password) || strings.Contains(string(record), auth) {
		t.Error("the pulled record holds the credential")
	}

	n.proc.Signal(syscall.SIGTERM)
	if code := n.proc.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	n.start()
	n.publish("tenant-after", pod("tenant-after", "tenant-b", corev1.PullNever, false))
	refusedNever("tenant-after")
	n.publish("friend", pod("friend", "default", corev1.PullNever, true))
	n.waitStatus("friend", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	if strings.Contains(n.proc.Logs(), password) {
		t.Error("jetlet's log shows the password")
	}
}
