package embedded

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestVersionAndStatus(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	v, err := h.rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.GetRuntimeName() != "jetlet-proc" || v.GetRuntimeApiVersion() != "v1" || v.GetRuntimeVersion() != RuntimeVersion {
		t.Fatalf("version = %v", v)
	}
	st, err := h.rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, c := range st.GetStatus().GetConditions() {
		ready[c.GetType()] = c.GetStatus()
	}
	if !ready[runtimeapi.RuntimeReady] || !ready[runtimeapi.NetworkReady] {
		t.Fatalf("conditions = %v", st.GetStatus().GetConditions())
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without Dir succeeded")
	}
}
