package embedded

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestExecSync(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	cfg := containerConfig("c", nil, "sleep", "1000")
	cfg.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hello")}}
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)

	resp, err := h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Timeout: 30,
		Cmd: []string{"sh", "-c", `echo "$GREETING"; pwd; echo oops >&2; exit 4`}})
	if err != nil {
		t.Fatal(err)
	}
	out := string(resp.GetStdout())
	if !strings.HasPrefix(out, "hello\n") || out != "hello\n/\n" || string(resp.GetStderr()) != "oops\n" || resp.GetExitCode() != 4 {
		t.Fatalf("stdout %q stderr %q exit %d", out, resp.GetStderr(), resp.GetExitCode())
	}

	resp, err = h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}})
	if err != nil || resp.GetExitCode() != 0 {
		t.Fatalf("true: %v %v", resp, err)
	}

	// No signal is ignored in the container (the shim ignores SIGHUP and
	// SIGINT; Ctrl-C at an exec's terminal must interrupt).
	resp, err = h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"grep", "SigIgn", "/proc/self/status"}})
	if err != nil || string(resp.GetStdout()) != "SigIgn:\t0000000000000000\n" {
		t.Fatalf("signals ignored in an exec: %q, %v", resp.GetStdout(), err)
	}

	_, err = h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Timeout: 1, Cmd: []string{"sleep", "1000"}})
	wantCode(t, err, codes.DeadlineExceeded)

	_, err = h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"no-such-command-here"}})
	if err == nil {
		t.Fatal("exec of a missing command succeeded")
	}
	_, err = h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "unknown", Cmd: []string{"true"}})
	wantCode(t, err, codes.NotFound)

	// Not running: refused.
	if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}})
	wantCode(t, err, codes.FailedPrecondition)
}
