package kubetest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/test/kubetest"
	"github.com/jetlet/jetlet/test/poll"
)

// A Deployment goes as far as it can without nodes: kube-controller-manager
// makes its ReplicaSet and that its two pods, kube-scheduler finds no node
// for either and says so, and kubectl drives and reads it all.
func TestADeploymentWithoutNodesIsUnschedulable(t *testing.T) {
	cp := kubetest.Start(t)
	ctx := t.Context()
	if _, err := cp.Kubectl(ctx, "create", "deployment", "web", "--image=registry.invalid/web:1", "--replicas=2"); err != nil {
		t.Fatal(err)
	}

	var pods []corev1.Pod
	var listErr error
	poll.Until(t, time.Minute, func() string {
		return fmt.Sprintf("two pods of web, each unschedulable (error %v; pods %s)", listErr, podStates(pods))
	}, func() bool {
		list, err := cp.Client.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if listErr = err; err != nil {
			return false
		}
		pods = list.Items
		return len(pods) == 2 && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return !unschedulable(p) })
	})
	for _, pod := range pods {
		owner := metav1.GetControllerOf(&pod)
		if owner == nil || owner.Kind != "ReplicaSet" {
			t.Errorf("pod %s: controller %+v, want a ReplicaSet", pod.Name, owner)
			continue
		}
		rs, err := cp.Client.AppsV1().ReplicaSets(metav1.NamespaceDefault).Get(ctx, owner.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if owner := metav1.GetControllerOf(rs); owner == nil || owner.Kind != "Deployment" || owner.Name != "web" {
			t.Errorf("replica set %s: controller %+v, want Deployment web", rs.Name, owner)
		}
	}

	var events string
	var eventsErr error
	poll.Until(t, time.Minute, func() string {
		return fmt.Sprintf("a FailedScheduling event for each pod (kubectl: %q, %v)", events, eventsErr)
	}, func() bool {
		events, eventsErr = cp.Kubectl(ctx, "get", "events", "--field-selector", "reason=FailedScheduling",
			"-o", `jsonpath={range .items[*]}{.involvedObject.name}{"\n"}{end}`)
		names := strings.Fields(events)
		return eventsErr == nil && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return !slices.Contains(names, p.Name) })
	})
}

// unschedulable says whether the scheduler marked the pod as fitting no node.
func unschedulable(pod corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

func podStates(pods []corev1.Pod) string {
	var states []string
	for _, p := range pods {
		states = append(states, fmt.Sprintf("%s %s %+v", p.Name, p.Status.Phase, p.Status.Conditions))
	}
	return "[" + strings.Join(states, "; ") + "]"
}
