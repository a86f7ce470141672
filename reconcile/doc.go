// Package reconcile is jetlet's port of kubelet's pod sync: given a pod's
// desired state (a core/v1 Pod) and what the container runtime reports, it
// decides what to do (computePodActions, a pure function) and does it
// (SyncPod, KillPod), with kubelet's semantics for sandboxes, init containers,
// restart policies, restart back-off, image pulling, pod phase and garbage
// collection.
//
// The package talks to the runtime only through the small interfaces it
// declares (Runtime and its roles), in the CRI's own types
// (k8s.io/cri-api runtime/v1) and with the signatures of *runtime.Client,
// which satisfies them as it is. It imports neither gRPC nor NATS: the CRI's
// generated package links gRPC, reconcile never calls it; not-found is
// recognised by runtime/crierr's sentinel; the consumer turns events and
// results into messages.
//
// Flow of one sync, as in kubelet:
//
//	GetPodStatus(uid)  ──▶  PodStatus (runtime only, newest first)
//	SyncPod(pod, status):
//	  1.  computePodActions(pod, status) ──▶ PodActions (pure, table-tested)
//	  1b. write the volumes of API data (ConfigMaps, Secrets, downward API)
//	  1c. ensure the pod's cgroup (PodCgroups), for what will run
//	  2.  kill the pod, if the sandbox must be (re)created or nothing is left to run
//	  3.  else kill the unwanted containers (spec changed, probe failed, unknown state)
//	  4.  prune exited init containers (keep the newest of each)
//	  5.  create the sandbox, if needed
//	  6.  start the next init container and restart the sidecars
//	  7.  resize the running containers in place
//	  8.  start the app containers (image pull, back-off, create, start)
//
// The steps are numbered in sync.go's comments as here.
package reconcile
