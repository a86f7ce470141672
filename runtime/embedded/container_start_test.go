package embedded

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestExitCodesAndReasons(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	tests := []struct {
		name   string
		cmd    []string
		code   int32
		reason string
	}{
		{"success", []string{"sh", "-c", "exit 0"}, 0, "Completed"},
		{"failure", []string{"sh", "-c", "exit 3"}, 3, "Error"},
		{"killed by signal", []string{"sh", "-c", "kill -9 $$"}, 137, "Error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := h.run(sb, sbCfg, strings.ReplaceAll(tt.name, " ", "-"), tt.cmd...)
			st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
			if st.GetExitCode() != tt.code || st.GetReason() != tt.reason {
				t.Fatalf("exit %d reason %q, want %d %q", st.GetExitCode(), st.GetReason(), tt.code, tt.reason)
			}
		})
	}
}

func TestStartError(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.create(sb, sbCfg, containerConfig("c", nil, "/no/such/binary"))
	_, err := h.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	if err == nil || !strings.Contains(err.Error(), "/no/such/binary") {
		t.Fatalf("StartContainer error = %v", err)
	}
	st := h.status(id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 128 || st.GetReason() != "StartError" || st.GetMessage() == "" {
		t.Fatalf("status after start error: %v", st)
	}
	// Starting it again is refused: it is not CREATED.
	_, err = h.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestStartEnvWorkdirMounts(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	src := filepath.Join(h.shared, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "greeting"), []byte("hello-from-mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := containerConfig("c", nil, "sh", "-c", `echo "FOO=$FOO"; echo "PWD=$(pwd)"; cat /etc/app/greeting; echo; echo done`)
	cfg.Envs = []*runtimeapi.KeyValue{{Key: "FOO", Value: []byte("bar baz")}}
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/etc/app", HostPath: src}}
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetExitCode() != 0 {
		t.Fatalf("exit %d: %v", st.GetExitCode(), st)
	}
	lines := h.waitLog(st.GetLogPath(), "done")
	text := strings.Join(lines, "\n") + "\n"
	for _, want := range []string{"stdout F FOO=bar baz", "stdout F hello-from-mount", "stdout F PWD=/\n"} {
		if !strings.Contains(text, want) {
			t.Fatalf("log lacks %q:\n%s", want, text)
		}
	}

	// An explicit working dir in the container's view is used as is.
	cfg2 := containerConfig("wd", nil, "sh", "-c", "pwd")
	cfg2.WorkingDir = src
	id2 := h.create(sb, sbCfg, cfg2)
	h.startC(id2)
	st2 := h.waitState(id2, runtimeapi.ContainerState_CONTAINER_EXITED)
	h.waitLog(st2.GetLogPath(), "stdout F "+src)
}

func TestContainerLogFormat(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sh", "-c", `echo out1; echo err1 >&2; printf partial`)
	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	data, err := os.ReadFile(st.GetLogPath())
	if err != nil {
		t.Fatal(err)
	}
	// <timestamp> <stream> <tag> <content>, as the shim's own tests check in detail.
	for _, want := range []string{" stdout F out1\n", " stderr F err1\n", " stdout P partial\n"} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("log lacks %q:\n%s", want, data)
		}
	}
}
