// Command scheduler places pods on the nodes of a jetlet fleet as
// kube-scheduler would, through the client package alone (docs/client.md):
//
//   - it keeps the nodes' records (client.WatchNodes, after client.Nodes);
//   - it filters them with Node.Admits, the node's own admission checks run
//     on its record: allocatable left, node selector, required node
//     affinity, taints, cordon, pressure;
//   - it scores those left as NodeResourcesFit's LeastAllocated strategy
//     does (cpu and memory, weight 1 each: (allocatable - requested) × 100 /
//     allocatable; ties broken at random);
//   - it applies the pod to the best node (client.Apply) and waits for its
//     result (client.Wait), counting the pod on that node meanwhile, as
//     kube-scheduler's assumed pods, until a record stamped after the result
//     counts it; a pod that no node admits while pods are assumed waits for
//     the next record, as kube-scheduler requeues a pod on a node's update;
//   - a node that answers Rejected with an OutOf* reason (a record behind,
//     another writer) is passed over and the pod applied to the next best.
//
// It reads Pod manifests (YAML or JSON, several documents) on stdin and
// prints one line a pod: the node it runs on, and the nodes that refused it.
// It exits 1 when a pod found no node, saying what each node lacked. It
// places the pods it is given; it does not look for copies already running.
//
// Against a `jetlet run` with its embedded NATS, from the directory it ran
// in (the scheduler presents the seed of ./jetlet-data):
//
//	go run ./examples/scheduler < pods.yaml
//
// Against nodes on a NATS of their own (`jetlet run --nats-url`):
//
//	go run ./examples/scheduler --nats-url nats://nats:4222 --parallel 16 < pods.yaml
//	pod/default/web-0: n2
//	pod/default/web-1: n3 (n1 refused: OutOfpods)
//
// Its test places 200 pods on three real `jetlet run` nodes and reports the
// pods placed per second:
//
//	go test -race -run TestSchedulerPlaces200PodsOnThreeNodes -v ./examples/scheduler
package main
