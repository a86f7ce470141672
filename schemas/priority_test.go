package schemas

import (
	"errors"
	"strings"
	"testing"
)

// A pod naming a system priority class gets the class's priority, as the API
// server's Priority admission gives it before kubelet sees the pod; one that
// contradicts it is refused, as there.
func TestSystemPriorityClassesGiveTheirPriority(t *testing.T) {
	for _, tc := range []struct {
		name     string
		class    string
		priority any // nil: not set
		want     int32
		wantNil  bool
		refused  bool
	}{
		{name: "system-node-critical", class: "system-node-critical", want: 2000001000},
		{name: "system-cluster-critical", class: "system-cluster-critical", want: 2000000000},
		{name: "system class with its own value", class: "system-node-critical", priority: 2000001000, want: 2000001000},
		{name: "system class with another value", class: "system-cluster-critical", priority: 5, refused: true},
		{name: "another class: the scheduler's", class: "high", wantNil: true},
		{name: "another class with a priority", class: "high", priority: 7, want: 7},
		{name: "no class", wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := DecodeIntent(intentJSON(func(m map[string]any) {
				if tc.class != "" {
					specOf(m)["priorityClassName"] = tc.class
				}
				if tc.priority != nil {
					specOf(m)["priority"] = tc.priority
				}
			}), target)
			if tc.refused {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pod.spec.priority") || !strings.Contains(err.Error(), "computed 2000000000") {
					t.Fatalf("DecodeIntent = %v, want pod.spec.priority refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := in.Pod.Spec.Priority
			switch {
			case tc.wantNil && got != nil:
				t.Fatalf("priority %d, want none", *got)
			case !tc.wantNil && (got == nil || *got != tc.want):
				t.Fatalf("priority %v, want %d", got, tc.want)
			}
		})
	}
}
