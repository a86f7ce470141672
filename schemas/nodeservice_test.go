package schemas_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/schemas"
)

func TestNodeServiceRequestsValidate(t *testing.T) {
	ref := schemas.PodRef{Namespace: "default", Name: "web"}
	neg := int64(-1)
	tests := []struct {
		name  string
		req   interface{ Validate() error }
		field string // "" when valid
	}{
		{"logs", schemas.LogsRequest{PodRef: ref, Follow: true}, ""},
		{"logs without a name", schemas.LogsRequest{PodRef: schemas.PodRef{Namespace: "default"}}, "namespace"},
		{"logs with a bad uid", schemas.LogsRequest{PodRef: schemas.PodRef{Namespace: "a", Name: "b", UID: "a.b"}}, "uid"},
		{"logs with a negative tail", schemas.LogsRequest{PodRef: ref, TailLines: &neg}, "tailLines"},
		{"logs with a negative window", schemas.LogsRequest{PodRef: ref, Window: -1}, "window"},
		{"logs following a previous instance", schemas.LogsRequest{PodRef: ref, Follow: true, Previous: true}, "previous"},
		{"exec", schemas.ExecRequest{PodRef: ref, Command: []string{"ls"}}, ""},
		{"exec without a command", schemas.ExecRequest{PodRef: ref}, "command"},
		{"exec with a negative timeout", schemas.ExecRequest{PodRef: ref, Command: []string{"ls"}, TimeoutSeconds: -1}, "timeoutSeconds"},
		{"port-forward of a session", schemas.StreamRequest{PodRef: ref, Kind: schemas.StreamPortForward, Port: 80, Session: "Abc_12-x"}, ""},
		{"a session of an exec", schemas.StreamRequest{PodRef: ref, Kind: schemas.StreamExec, Command: []string{"sh"}, Session: "s"}, "session"},
		{"a session with a dot", schemas.StreamRequest{PodRef: ref, Kind: schemas.StreamPortForward, Port: 80, Session: "a.b"}, "session"},
		{"a session too long", schemas.StreamRequest{PodRef: ref, Kind: schemas.StreamPortForward, Port: 80, Session: strings.Repeat("a", schemas.MaxStreamSession+1)}, "session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			var ve *schemas.ValidationError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &ve) || ve.Field != tt.field || !errors.Is(err, schemas.ErrInvalid)):
				t.Fatalf("Validate() = %v, want an invalid %s", err, tt.field)
			}
		})
	}
}

func TestNodeServiceSubjects(t *testing.T) {
	s := schemas.Subjects{Prefix: "jetlet"}
	for got, want := range map[string]string{
		s.NodeService("n1", schemas.EndpointLogs): "jetlet.node.n1.logs",
		s.NodeService("n1", schemas.EndpointExec): "jetlet.node.n1.exec",
		s.LogCredit("n1", "abc"):                  "jetlet.node.n1.credit.abc",
	} {
		if got != want {
			t.Errorf("subject %q, want %q", got, want)
		}
	}
}
