package kubecontainer

// PodStateProvider tells garbage collection which pods are gone.
type PodStateProvider interface {
	// ShouldPodContentBeRemoved: the pod is no longer wanted on this node, so
	// its dead containers, sandboxes, logs and emptyDir volumes may go.
	ShouldPodContentBeRemoved(uid string) bool
}

// PodStateFunc adapts a function to PodStateProvider.
type PodStateFunc func(uid string) bool

// ShouldPodContentBeRemoved implements PodStateProvider.
func (f PodStateFunc) ShouldPodContentBeRemoved(uid string) bool { return f(uid) }
