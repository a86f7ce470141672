package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/test/fakecri"
)

// A pod's allocation, recorded in its data dir, reads back as it was; a pod
// without a record has none.
func TestAllocationCheckpointRoundTrip(t *testing.T) {
	m, _ := newTestManager(t, fakecri.New())
	if alloc, err := m.LoadAllocation("uid1"); alloc != nil || err != nil {
		t.Fatalf("nothing recorded: %v %v, want none", alloc, err)
	}
	limited := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Resources: limited})
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img:1"}}
	if err := m.StoreAllocation(pod); err != nil {
		t.Fatal(err)
	}
	alloc, err := m.LoadAllocation("uid1")
	if err != nil || len(alloc) != 2 || !equality.Semantic.DeepEqual(alloc["app"], limited) {
		t.Fatalf("read back %v %v, want app's 128Mi limit and init's nothing", alloc, err)
	}
}
