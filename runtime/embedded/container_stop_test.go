package embedded

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStopContainer(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	tests := []struct {
		name    string
		cmd     string
		timeout int64
		code    int32 // 143: ended by SIGTERM; 137: by SIGKILL
	}{
		// sleep dies of SIGTERM. The call's deadline is shorter than the stop
		// timeout, so it fails if Stop waited for the timeout.
		{"exits on SIGTERM", "echo ready; exec sleep 1000", 60, 143},
		// The ignored disposition survives exec: only SIGKILL ends it.
		{"ignores SIGTERM", "trap '' TERM; echo ready; exec sleep 1000", 1, 137},
		{"timeout zero kills", "echo ready; exec sleep 1000", 0, 137},
		{"shell exits with own code", "trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done", 60, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := h.run(sb, sbCfg, "c-"+time.Now().Format("150405.000000000"), "sh", "-c", tt.cmd)
			h.waitLog(h.status(id).GetLogPath(), "ready")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: tt.timeout}); err != nil {
				t.Fatalf("StopContainer: %v", err)
			}
			st := h.status(id)
			if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != tt.code || st.GetReason() != "Error" {
				t.Fatalf("after stop: state %v exit %d reason %q, want exit %d", st.GetState(), st.GetExitCode(), st.GetReason(), tt.code)
			}
			// Idempotent: again, and on an unknown id.
			if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: "unknown", Timeout: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStopKillsProcessGroup(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	// A background child in the same group must go too.
	id := h.run(sb, sbCfg, "c", "sh", "-c", "sleep 1000 & echo child=$!; wait")
	h.waitLog(h.status(id).GetLogPath(), "child=")
	// The pid it printed is its pod's view: find the child by the host's.
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", h.pid(id), h.pid(id)))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(kids)))
	if child == 0 || !processAlive(child) {
		t.Fatalf("no live child: %q", kids)
	}
	if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "background child gone", func() bool { return !processAlive(child) })
}

func TestStopSignalFromConfig(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	cfg := containerConfig("c", nil, "sh", "-c", "trap 'exit 42' USR1; echo ready; while :; do sleep 0.05; done")
	cfg.StopSignal = runtimeapi.Signal_SIGNAL_SIGUSR1
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	h.waitLog(h.status(id).GetLogPath(), "ready")
	if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if st := h.status(id); st.GetExitCode() != 42 {
		t.Fatalf("exit %d, want 42 (stopped with SIGUSR1)", st.GetExitCode())
	}
}
