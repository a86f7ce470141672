package agent

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
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

// --default-host-users=false gives pods a user namespace only where the
// runtime has them; elsewhere the node warns once and pods keep the host's
// users rather than being refused.
func TestUserNamespacesByDefault(t *testing.T) {
	for _, tc := range []struct {
		defaultHostUsers, supported, want bool
		logs                              string
	}{
		{defaultHostUsers: true, supported: true, want: false, logs: ""},
		{defaultHostUsers: true, supported: false, want: false, logs: ""},
		{defaultHostUsers: false, supported: true, want: true, logs: "get a user namespace of their own"},
		{defaultHostUsers: false, supported: false, want: false, logs: `"level":"warn"`},
	} {
		var out strings.Builder
		got := userNamespacesByDefault(tc.defaultHostUsers, tc.supported, zerolog.New(&out))
		if got != tc.want || (tc.logs == "") != (out.Len() == 0) || !strings.Contains(out.String(), tc.logs) {
			t.Errorf("default-host-users %v, supported %v: %v, logged %q; want %v, a log with %q", tc.defaultHostUsers, tc.supported, got, out.String(), tc.want, tc.logs)
		}
	}
}
