package nodeshutdown

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func podOf(name string, priority *int32, grace *int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Priority: priority, TerminationGracePeriodSeconds: grace},
	}
}

func TestGroupByPriority(t *testing.T) {
	groups := []PriorityGrace{{0, 60}, {1000, 120}, {10000, 180}, {100000, 10}}
	pods := []*corev1.Pod{
		podOf("none", nil, nil),                   // priority 0
		podOf("negative", ptr.To[int32](-5), nil), // below every group: the lowest
		podOf("at-1000", ptr.To[int32](1000), nil),
		podOf("between", ptr.To[int32](5000), nil), // the group at or below: 1000
		podOf("at-10000", ptr.To[int32](10000), nil),
		podOf("above", ptr.To[int32](2_000_000_000), nil), // above every group: the highest
	}
	want := [][]string{{"none", "negative"}, {"at-1000", "between"}, {"at-10000"}, {"above"}}
	got := groupByPriority(groups, pods)
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for i, g := range got {
		if g.PriorityGrace != groups[i] {
			t.Errorf("group %d is %v, want %v", i, g.PriorityGrace, groups[i])
		}
		var names []string
		for _, p := range g.pods {
			names = append(names, p.Name)
		}
		if len(names) != len(want[i]) {
			t.Errorf("group %d (priority %d) has %v, want %v", i, g.Priority, names, want[i])
			continue
		}
		for j := range names {
			if names[j] != want[i][j] {
				t.Errorf("group %d (priority %d) has %v, want %v", i, g.Priority, names, want[i])
			}
		}
	}
}

func TestGroupByPriorityTwoFlags(t *testing.T) {
	groups := Config{GracePeriod: 30e9, GracePeriodCriticalPods: 10e9}.groups()
	got := groupByPriority(groups, []*corev1.Pod{
		podOf("plain", nil, nil),
		podOf("high", ptr.To[int32](1_999_999_999), nil),
		podOf("cluster-critical", ptr.To[int32](2_000_000_000), nil),
		podOf("node-critical", ptr.To[int32](2_000_001_000), nil),
	})
	if len(got[0].pods) != 2 || got[0].pods[1].Name != "high" || len(got[1].pods) != 2 || got[1].pods[0].Name != "cluster-critical" {
		t.Fatalf("groups: %d pods for 20s, %d for 10s; want plain and high first, the critical pods last", len(got[0].pods), len(got[1].pods))
	}
}

func TestPodGrace(t *testing.T) {
	g := PriorityGrace{Priority: 0, GracePeriodSeconds: 20}
	for _, tc := range []struct {
		name string
		pod  *int64
		want int64
	}{
		{"no grace of its own: the group's", nil, 20},
		{"shorter: the pod's", ptr.To[int64](5), 5},
		{"equal", ptr.To[int64](20), 20},
		{"longer: capped at the group's", ptr.To[int64](300), 20},
		{"zero: at once", ptr.To[int64](0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podGrace(podOf("p", nil, tc.pod), g); got != tc.want {
				t.Fatalf("podGrace = %d, want %d", got, tc.want)
			}
		})
	}
}
