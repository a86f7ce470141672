package schemas

import (
	"errors"
	"slices"
	"testing"
)

// Requests over their limits are reported in the order of their names, the
// same at every decoding (they come from a map).
func TestRequestsOverLimitsAreReportedInOrder(t *testing.T) {
	body := intentJSON(func(m map[string]any) {
		container0(m)["resources"] = map[string]any{
			"limits":   map[string]any{"cpu": "1", "memory": "1Mi", "hugepages-2Mi": "2Mi"},
			"requests": map[string]any{"cpu": "2", "memory": "2Mi", "hugepages-2Mi": "4Mi"},
		}
	})
	want := []string{
		"pod.spec.containers[0].resources.requests[cpu]",
		"pod.spec.containers[0].resources.requests[hugepages-2Mi]",
		"pod.spec.containers[0].resources.requests[memory]",
	}
	for range 20 {
		_, err := DecodeIntent(body, target)
		var problems ValidationErrors
		if !errors.As(err, &problems) {
			t.Fatalf("accepted: %v", err)
		}
		var got []string
		for _, p := range problems {
			got = append(got, p.Field)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("problems %q, want %q", got, want)
		}
	}
}
