package schemas

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// Pod-level resources are validated as the API server's validatePodResources
// (rows after its TestValidatePodResourceConsistency and the pod-level rows
// of TestValidatePodSpec), after its defaults.
func TestPodLevelResources(t *testing.T) {
	type rl = map[string]any
	tests := []struct {
		name       string
		pod        rl     // spec.resources
		containers []rl   // each container's resources, by index
		field      string // the first problem's; "" accepted
		kind       ErrorKind
	}{
		{name: "cpu and memory", pod: rl{"requests": rl{"cpu": "1", "memory": "1Gi"}, "limits": rl{"cpu": "2", "memory": "2Gi"}}},
		{name: "huge pages", pod: rl{"requests": rl{"memory": "1Gi", "hugepages-2Mi": "4Mi"}, "limits": rl{"memory": "1Gi", "hugepages-2Mi": "4Mi"}}},
		{name: "limits alone", pod: rl{"limits": rl{"cpu": "1"}}},
		{name: "requests alone", pod: rl{"requests": rl{"memory": "1Gi"}}},
		{name: "empty", pod: rl{}},
		{name: "ephemeral-storage", pod: rl{"requests": rl{"ephemeral-storage": "1Gi"}}, field: "pod.spec.resources.requests[ephemeral-storage]", kind: ErrUnsupported},
		{name: "an extended resource", pod: rl{"limits": rl{"example.com/gpu": "1"}}, field: "pod.spec.resources.limits[example.com/gpu]", kind: ErrUnsupported},
		{name: "claims", pod: rl{"claims": []any{rl{"name": "gpu"}}}, field: "pod.spec.resources.claims", kind: ErrUnsupported},
		{name: "request over limit", pod: rl{"requests": rl{"cpu": "2"}, "limits": rl{"cpu": "1"}}, field: "pod.spec.resources.requests[cpu]", kind: ErrInvalid},
		{name: "negative", pod: rl{"limits": rl{"memory": "-1"}}, field: "pod.spec.resources.limits[memory]", kind: ErrInvalid},
		{name: "containers' requests within the pod's", pod: rl{"requests": rl{"cpu": "1"}},
			containers: []rl{{"requests": rl{"cpu": "500m"}}, {"requests": rl{"cpu": "500m"}}}},
		{name: "containers' requests over the pod's", pod: rl{"requests": rl{"cpu": "1"}},
			containers: []rl{{"requests": rl{"cpu": "600m"}}, {"requests": rl{"cpu": "500m"}}}, field: "pod.spec.resources.requests[cpu]", kind: ErrInvalid},
		{name: "a request the pod does not set", pod: rl{"requests": rl{"cpu": "1"}},
			containers: []rl{{"requests": rl{"memory": "1Gi"}}}},
		{name: "a container's limit within the pod's", pod: rl{"limits": rl{"memory": "1Gi"}},
			containers: []rl{{"limits": rl{"memory": "512Mi"}}, {"limits": rl{"memory": "512Mi"}}}},
		{name: "a container's limit over the pod's", pod: rl{"limits": rl{"memory": "1Gi"}},
			containers: []rl{{}, {"requests": rl{"memory": "100Mi"}, "limits": rl{"memory": "2Gi"}}}, field: "pod.spec.containers[1].resources.limits[memory]", kind: ErrInvalid},
		// Defaulted: a pod limit under the containers' summed requests
		// makes a pod request (their sum) over the pod limit.
		{name: "defaulted request over the pod's limit", pod: rl{"limits": rl{"cpu": "1"}},
			containers: []rl{{"requests": rl{"cpu": "800m"}}, {"requests": rl{"cpu": "800m"}}}, field: "pod.spec.resources.requests[cpu]", kind: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := intentJSON(func(m map[string]any) {
				specOf(m)["resources"] = tt.pod
				var cs []any
				for i, r := range tt.containers {
					cs = append(cs, map[string]any{"name": "c" + string(rune('0'+i)), "image": "nginx", "resources": r})
				}
				if cs != nil {
					specOf(m)["containers"] = cs
				}
			})
			_, err := DecodeIntent(body, target)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var problems ValidationErrors
			if !errors.As(err, &problems) {
				t.Fatalf("accepted (%v), want %s refused", err, tt.field)
			}
			if p := problems[0]; p.Field != tt.field || p.Kind != tt.kind {
				t.Fatalf("first problem %s (%s: %s), want %s (%s)", p.Field, p.Kind, p.Reason, tt.field, tt.kind)
			}
		})
	}
}

// The API server's pod-level defaults (its TestSetDefaultPodLevelResources
// rows): requests from the containers' or from the pod's limits, limits from
// the containers' when every one sets them, huge pages from the containers'.
func TestPodLevelResourcesDefaults(t *testing.T) {
	q := resource.MustParse
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return l
	}
	tests := []struct {
		name                   string
		pod                    corev1.ResourceRequirements
		containers             []corev1.ResourceRequirements
		wantRequests, wantLims corev1.ResourceList
	}{
		{name: "requests from the pod's limits",
			pod:          corev1.ResourceRequirements{Limits: list("cpu", "1", "memory", "1Gi")},
			containers:   []corev1.ResourceRequirements{{}},
			wantRequests: list("cpu", "1", "memory", "1Gi"), wantLims: list("cpu", "1", "memory", "1Gi")},
		{name: "requests from the containers' where they request",
			pod:          corev1.ResourceRequirements{Limits: list("cpu", "2", "memory", "1Gi")},
			containers:   []corev1.ResourceRequirements{{Requests: list("cpu", "300m")}, {Requests: list("cpu", "200m")}},
			wantRequests: list("cpu", "500m", "memory", "1Gi"), wantLims: list("cpu", "2", "memory", "1Gi")},
		{name: "a given request stays",
			pod:          corev1.ResourceRequirements{Limits: list("cpu", "2"), Requests: list("cpu", "1")},
			containers:   []corev1.ResourceRequirements{{Requests: list("cpu", "300m")}},
			wantRequests: list("cpu", "1"), wantLims: list("cpu", "2")},
		{name: "limits from the containers' when each sets one",
			pod:          corev1.ResourceRequirements{Requests: list("memory", "1Gi")},
			containers:   []corev1.ResourceRequirements{{Limits: list("memory", "1Gi", "cpu", "1")}, {Limits: list("memory", "512Mi")}},
			wantRequests: list("memory", "1Gi"), wantLims: list("memory", "1536Mi")},
		{name: "no limits when one container sets none",
			pod:          corev1.ResourceRequirements{Requests: list("memory", "1Gi")},
			containers:   []corev1.ResourceRequirements{{Limits: list("memory", "1Gi")}, {}},
			wantRequests: list("memory", "1Gi")},
		{name: "huge pages from the containers'",
			pod:          corev1.ResourceRequirements{Limits: list("memory", "1Gi")},
			containers:   []corev1.ResourceRequirements{{Limits: list("hugepages-2Mi", "4Mi")}},
			wantRequests: list("memory", "1Gi", "hugepages-2Mi", "4Mi"), wantLims: list("memory", "1Gi", "hugepages-2Mi", "4Mi")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: tt.pod.DeepCopy()}}
			for i, r := range tt.containers {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Resources: r})
			}
			SetPodDefaults(pod)
			r := pod.Spec.Resources
			if !equalLists(r.Requests, tt.wantRequests) || !equalLists(r.Limits, tt.wantLims) {
				t.Fatalf("requests %v limits %v, want %v and %v", r.Requests, r.Limits, tt.wantRequests, tt.wantLims)
			}
		})
	}
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if w, ok := b[name]; !ok || !q.Equal(w) {
			return false
		}
	}
	return true
}
