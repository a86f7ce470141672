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

	"github.com/jetlet/jetlet/schemas"
)

// jetlet run with --image-credentials matching the pod's image, at trace
// level: the pod runs (the embedded runtime ignores credentials) and the
// password shows nowhere in the process's log, the results or the status.
// The pull against a registry that needs them is the containerd stage's
// (TestPrivateRegistryPullWithNodeCredentials).
func TestImageCredentialsAreNeverLogged(t *testing.T) {
	const password = "e2e-s3cr3t-never-logged"
	creds := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("jetlet:" + password))
	if err := os.WriteFile(creds, []byte(fmt.Sprintf(`{"auths": {"docker.io": {"auth": %q}}}`, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, shortDir(t), "", "--image-credentials", creds, "--log-level", "trace")
	n.publish("private", podJSON("private", 1, "Always", "exec sleep 300"))
	if r := n.results("private", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s %+v", r.Outcome, r.Error, r.Actions)
	}
	st := n.waitStatus("private", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.proc.WaitLog("registry credentials loaded", 10*time.Second)
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
