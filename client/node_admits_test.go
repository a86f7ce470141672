package client_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

func TestNodeAdmits(t *testing.T) {
	now := time.Now()
	base := func() *client.Node {
		return &client.Node{Name: "n1", Record: &schemas.NodeRecord{
			Node: "n1", HeartbeatAt: now, Labels: map[string]string{"zone": "a"},
			Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Allocated:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi"), corev1.ResourcePods: resource.MustParse("3")},
			Conditions:  []schemas.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}}
	}
	pod := func(memory string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}}}}}}
	}
	for _, tc := range []struct {
		name       string
		node       func(*client.Node)
		pod        func(*corev1.Pod)
		memory     string
		wantReason string
	}{
		{name: "fits in what is left", memory: "1Gi"},
		{name: "more than is left", memory: "2Gi", wantReason: "OutOfmemory"},
		{name: "selector", memory: "1Mi", pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }, wantReason: "NodeAffinity"},
		{name: "untolerated taint", memory: "1Mi", node: func(n *client.Node) {
			n.Record.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, wantReason: "TaintToleration"},
		{name: "tolerated taint", memory: "1Mi", node: func(n *client.Node) {
			n.Record.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, pod: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}},
		{name: "cordoned", memory: "1Mi", node: func(n *client.Node) { n.Record.Unschedulable = true }, wantReason: "NodeUnschedulable"},
		{name: "heartbeat late", memory: "1Mi", node: func(n *client.Node) { n.Record.HeartbeatAt = now.Add(-time.Hour) }, wantReason: client.NodeNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, p := base(), pod(tc.memory)
			if tc.node != nil {
				tc.node(n)
			}
			if tc.pod != nil {
				tc.pod(p)
			}
			ok, reason, message := n.Admits(p, now)
			if ok != (tc.wantReason == "") || reason != tc.wantReason {
				t.Fatalf("Admits = %v, %q (%s); want reason %q", ok, reason, message, tc.wantReason)
			}
		})
	}
}
