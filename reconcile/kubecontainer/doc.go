// Package kubecontainer holds what reconcile and its children (pleg, prober,
// podworkers) share, after kubelet's pkg/kubelet/container: the runtime's
// view of a pod (PodStatus, ContainerStatus, RuntimePod), the lifecycle facts
// it implies and their deterministic ids (PodFacts, EventID, the Emitter they
// go to), the result of a sync (PodSyncResult and kubelet's errors), probe
// results, the HandlerRunner role and how a handler's address is resolved,
// and what garbage collection asks of the pod workers (PodStateProvider).
// (kubelet's label and annotation keys are runtime/crilabels'.)
//
// It is a leaf: it imports schemas and the Kubernetes and CRI types, nothing
// of reconcile. reconcile and its children import it; no child of reconcile
// imports reconcile (the pod workers' integration tests excepted, which drive
// a real one).
package kubecontainer
