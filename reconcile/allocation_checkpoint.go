package reconcile

import (
	"errors"
	"io/fs"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// allocationFile records, in a pod's data dir, the resources the node
// allocated each of its containers: kubelet's allocation checkpoint, which
// a restarted jetlet syncs the pod with instead of a resize it never took.
// Garbage collection removes it with the pod's data dir.
const allocationFile = "allocated-resources.json"

// StoreAllocation records the resources of every container of pod (its
// spec as the node allocated it), by container name, and its pod-level
// resources (kubecontainer.AllocationPodLevel).
func (m *Kuberuntime) StoreAllocation(pod *corev1.Pod) error {
	dir, err := m.makePodDataDir(string(pod.UID))
	if err != nil {
		return err
	}
	alloc := map[string]corev1.ResourceRequirements{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			alloc[c.Name] = c.Resources
		}
	}
	if pod.Spec.Resources != nil {
		alloc[kubecontainer.AllocationPodLevel] = *pod.Spec.Resources
	}
	return atomicfile.WriteJSON(filepath.Join(dir, allocationFile), alloc)
}

// LoadAllocation reads back what StoreAllocation recorded of pod uid; nil
// when nothing is.
func (m *Kuberuntime) LoadAllocation(uid string) (map[string]corev1.ResourceRequirements, error) {
	var alloc map[string]corev1.ResourceRequirements
	err := atomicfile.ReadJSON(filepath.Join(m.podDataDir(uid), allocationFile), &alloc)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return alloc, err
}
