package schemas

import (
	"errors"
	"testing"
)

// restartRule is a restartPolicyRules entry: action on an exit code In
// (or NotIn) values.
func restartRule(action, operator string, values ...int) map[string]any {
	vs := make([]any, len(values))
	for i, v := range values {
		vs[i] = v
	}
	return map[string]any{"action": action, "exitCodes": map[string]any{"operator": operator, "values": vs}}
}

// TestDecodeIntentRestartRules: a container's restartPolicy and
// restartPolicyRules as the API server validates them (ContainerRestartRules),
// and what the node refuses because it cannot act on it.
func TestDecodeIntentRestartRules(t *testing.T) {
	rules := func(n int, r map[string]any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	many := make([]int, 256)
	for _, tt := range []struct {
		name   string
		mutate func(m map[string]any)
		// field and kind of the first problem; "" when accepted.
		field string
		kind  ErrorKind
	}{
		{name: "app container restartPolicy Never", mutate: func(m map[string]any) { container0(m)["restartPolicy"] = "Never" }},
		{name: "rules with restartPolicy", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = []any{restartRule("Restart", "In", 42), restartRule("Restart", "NotIn")}
		}},
		{name: "20 rules of 255 values", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "OnFailure"
			container0(m)["restartPolicyRules"] = rules(20, restartRule("Restart", "In", many[:255]...))
		}},
		{name: "init container restartPolicy OnFailure", mutate: func(m map[string]any) {
			specOf(m)["initContainers"] = []any{map[string]any{"name": "init", "image": "busybox", "restartPolicy": "OnFailure"}}
		}},
		{name: "app container restartPolicy Sometimes", mutate: func(m map[string]any) { container0(m)["restartPolicy"] = "Sometimes" },
			field: "pod.spec.containers[0].restartPolicy", kind: ErrInvalid},
		{name: "rules without restartPolicy", mutate: func(m map[string]any) {
			container0(m)["restartPolicyRules"] = []any{restartRule("Restart", "In", 42)}
		}, field: "pod.spec.containers[0].restartPolicy", kind: ErrInvalid},
		{name: "21 rules", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = rules(21, restartRule("Restart", "In", 42))
		}, field: "pod.spec.containers[0].restartPolicyRules", kind: ErrInvalid},
		{name: "256 values", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = []any{restartRule("Restart", "In", many...)}
		}, field: "pod.spec.containers[0].restartPolicyRules[0].exitCodes.values", kind: ErrInvalid},
		{name: "action Ignore", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = []any{restartRule("Ignore", "In", 42)}
		}, field: "pod.spec.containers[0].restartPolicyRules[0].action", kind: ErrInvalid},
		{name: "action RestartAllContainers", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = []any{restartRule("RestartAllContainers", "In", 42)}
		}, field: "pod.spec.containers[0].restartPolicyRules[0].action", kind: ErrUnsupported},
		{name: "operator Exists", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = []any{restartRule("Restart", "Exists")}
		}, field: "pod.spec.containers[0].restartPolicyRules[0].exitCodes.operator", kind: ErrInvalid},
		{name: "rule without exitCodes", mutate: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = []any{map[string]any{"action": "Restart"}}
		}, field: "pod.spec.containers[0].restartPolicyRules[0].exitCodes", kind: ErrInvalid},
		{name: "rules on an init container", mutate: func(m map[string]any) {
			specOf(m)["initContainers"] = []any{map[string]any{"name": "init", "image": "busybox", "restartPolicy": "Never",
				"restartPolicyRules": []any{restartRule("Restart", "In", 42)}}}
		}, field: "pod.spec.initContainers[0].restartPolicyRules", kind: ErrUnsupported},
		{name: "rules on a sidecar", mutate: func(m map[string]any) {
			specOf(m)["initContainers"] = []any{map[string]any{"name": "side", "image": "busybox", "restartPolicy": "Always",
				"restartPolicyRules": []any{restartRule("Restart", "In", 42)}}}
		}, field: "pod.spec.initContainers[0].restartPolicyRules", kind: ErrInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeIntent(intentJSON(tt.mutate), target)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v, want a problem at %s", err, tt.field)
			}
			if ve.Field != tt.field || ve.Kind != tt.kind {
				t.Errorf("got %q (%s), want %q (%s); all: %v", ve.Field, ve.Kind, tt.field, tt.kind, err)
			}
		})
	}
}
