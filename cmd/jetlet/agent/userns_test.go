package agent

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Only the default handler's own word counts: containerd 1.6 reports no
// handler features at all, and runs a pod in the host's user namespace
// whatever it asks.
func TestSupportsUserNamespaces(t *testing.T) {
	handler := func(name string, userns bool) *runtimeapi.RuntimeHandler {
		return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: userns}}
	}
	for _, tc := range []struct {
		name string
		st   *runtimeapi.StatusResponse
		want bool
	}{
		{"containerd 1.6: no handlers", &runtimeapi.StatusResponse{}, false},
		{"default handler without", &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{handler("", false)}}, false},
		{"default handler with", &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{handler("runc", false), handler("", true)}}, true},
		{"another handler with", &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{handler("", false), handler("crun", true)}}, false},
		{"no features", &runtimeapi.StatusResponse{RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: ""}}}, false},
	} {
		if got := supportsUserNamespaces(tc.st); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
