package admission

import "testing"

func TestNodeShutdownRefusesEveryPod(t *testing.T) {
	node, pod := testNode(), testPod("web")
	if v := Admit(node, pod, NewHeld()); !v.Admit {
		t.Fatalf("refused before the shutdown: %+v", v)
	}
	node.ShuttingDown = true
	pod.Spec.Priority = new(int32)
	*pod.Spec.Priority = 2_000_001_000 // critical pods too, as kubelet's
	v := Admit(node, pod, NewHeld())
	if v.Admit || v.Reason != "NodeShutdown" || v.Message != "Pod was rejected as the node is shutting down." {
		t.Fatalf("got %+v, want refused with NodeShutdown and kubelet's message", v)
	}
}
