package bridge_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// sleeper is a busybox pod spec that sleeps, small and quick to stop, with
// no service account token (the bridge does not project one yet).
func sleeper() corev1.PodSpec {
	grace := int64(1)
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		AutomountServiceAccountToken:  new(false),
		Containers: []corev1.Container{{
			Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "86400"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("4Mi"),
			}},
		}},
	}
}

// deployment is name's Deployment of replicas sleepers, spread evenly over
// the nodes by hostname.
func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec := sleeper()
	// A cordoned or unreachable node (tainted) is no domain of the spread.
	honor := corev1.NodeInclusionPolicyHonor
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, NodeTaintsPolicy: &honor,
	}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (f *fleet) pods(t testing.TB, selector string) []corev1.Pod {
	t.Helper()
	list, err := f.cp.Client.CoreV1().Pods(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// runPod creates the pod name (labelled app=name) in the default namespace
// and returns it once it is Running. It needs the fleet's bridge.
func (f *fleet) runPod(t *testing.T, name string, spec corev1.PodSpec) corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": name}}, Spec: spec}
	if _, err := f.cp.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	poll.Until(t, 2*time.Minute, func() string { return name + " Running: " + podStates(pods) + "\n" + f.bridge.Logs() }, func() bool {
		pods = f.pods(t, "app="+name)
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning
	})
	return pods[0]
}

func podStates(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s on %q: %s %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Reason, p.DeletionTimestamp != nil))
	}
	return strings.Join(out, "; ")
}

// A Deployment of 6 replicas: kube-scheduler spreads them over the two
// jetlet nodes, 3 each; each pod becomes an intent of its node under its
// Kubernetes uid, runs there, and its status comes back (Running, Ready,
// its IP, its node's IP, its container running). Deleting the Deployment
// deletes the pods on the nodes and then from the API server.
func TestADeploymentSpreadOverTwoNodes(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "n1", "n2")
	ctx := t.Context()
	for _, name := range []string{"n1", "n2"} {
		f.schedulable(t, name)
	}
	if _, err := f.cp.Client.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, deployment("web", 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	poll.Until(t, 3*time.Minute, func() string { return "6 pods of web Running and Ready: " + podStates(pods) + "\n" + f.bridge.Logs() }, func() bool {
		pods = f.pods(t, "app=web")
		return len(pods) == 6 && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning || !podReady(p) })
	})
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		st := p.Status
		if st.PodIP == "" || st.HostIP == "" || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil || st.StartTime == nil {
			t.Errorf("pod %s status %+v: want its IP, its node's, its container running", p.Name, st)
		}
		if !slices.ContainsFunc(st.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue
		}) {
			t.Errorf("pod %s conditions %+v: the scheduler's PodScheduled is lost", p.Name, st.Conditions)
		}
		bus, err := f.jetlet.Statuses(ctx, p.Spec.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(bus, func(s schemas.PodStatus) bool {
			return s.UID == string(p.UID) && s.Name == p.Name && s.Phase == schemas.PhaseRunning
		}) {
			t.Errorf("pod %s (uid %s): no Running status of that uid on node %s", p.Name, p.UID, p.Spec.NodeName)
		}
	}
	if perNode["n1"] != 3 || perNode["n2"] != 3 {
		t.Errorf("pods per node %v, want 3 on n1 and n2", perNode)
	}
	// The node's lifecycle events are the pod's Events, as kubelet's.
	f.waitEvent(t, pods[0], "Started", "Started container app")

	if err := f.cp.Client.AppsV1().Deployments(metav1.NamespaceDefault).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Minute, func() string { return "web's pods gone: " + podStates(pods) }, func() bool {
		pods = f.pods(t, "app=web")
		return len(pods) == 0
	})
	for _, name := range []string{"n1", "n2"} {
		f.noLivePods(t, name)
	}
}

// A pod the node refuses at admission (more cpu than it has) is Failed
// with kubelet's reason, OutOfcpu.
func TestARefusedPodIsFailed(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "n1")
	ctx := t.Context()
	f.schedulable(t, "n1")
	spec := sleeper()
	spec.NodeName = "n1" // past the scheduler, which would not place it
	spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "greedy", Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": "greedy"}}, Spec: spec}
	if _, err := f.cp.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	poll.Until(t, 2*time.Minute, func() string { return "greedy Failed OutOfcpu: " + podStates(pods) + "\n" + f.bridge.Logs() }, func() bool {
		pods = f.pods(t, "app=greedy")
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodFailed && pods[0].Status.Reason == "OutOfcpu"
	})
	if !strings.Contains(pods[0].Status.Message, "cpu") {
		t.Errorf("greedy's message %q, want the node's account of its cpu", pods[0].Status.Message)
	}
	f.waitEvent(t, pods[0], "OutOfcpu", "cpu")
}

// waitEvent waits for an Event of pod with reason, from the bridge on the
// pod's node, whose message holds message.
func (f *fleet) waitEvent(t *testing.T, pod corev1.Pod, reason, message string) {
	t.Helper()
	var seen []string
	poll.Until(t, time.Minute, func() string {
		return fmt.Sprintf("an Event %s %q of pod %s from jetlet-bridge on %s (seen %q)", reason, message, pod.Name, pod.Spec.NodeName, seen)
	}, func() bool {
		list, err := f.cp.Client.CoreV1().Events(pod.Namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(pod.UID)})
		if err != nil {
			t.Fatal(err)
		}
		seen = nil
		for _, e := range list.Items {
			seen = append(seen, e.Source.Component+"/"+e.Source.Host+": "+e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, message) && e.Source.Component == "jetlet-bridge" && e.Source.Host == pod.Spec.NodeName {
				return true
			}
		}
		return false
	})
}
