package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

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
