package client

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
)

// TopSampleWindow is how long Top waits to ask a node again when its first
// answer has no CPU rate for a container yet (the node's previous sample
// was too old, or there was none): a rate needs two samples.
const TopSampleWindow = time.Second

// PodTop is one pod's usage as kubectl top pods shows it: metrics-server's
// figures (schemas.ResourceUsage) of each of its running containers.
type PodTop struct {
	Namespace, Name, UID, Node string
	Containers                 []ContainerTop // by name
}

// ContainerTop is one container's usage: cpu (absent while the node has no
// rate for it) and memory, its working set.
type ContainerTop struct {
	Name  string
	Usage corev1.ResourceList
}

// Usage is the pod's usage, its containers' added up, as kubectl top pods
// prints it.
func (p PodTop) Usage() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Containers {
		for name, q := range c.Usage {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// NodeTop is one node's usage beside its allocatable, as kubectl top nodes
// shows it.
type NodeTop struct {
	Name               string
	Usage, Allocatable corev1.ResourceList
}

// Stats asks node for its Summary (kubelet's /stats/summary): its usage and
// its pods'. The node must be live.
func (c *Client) Stats(ctx context.Context, node string) (*statsapi.Summary, error) {
	return askNode(ctx, c, node, schemas.EndpointStats, "its usage", func(ctx context.Context) (*statsapi.Summary, error) {
		return nodeclient.Stats(ctx, c.nc, c.subj, node)
	})
}

// TopPods is the usage of the pods of namespace ("" for every one) on every
// live node, or on node alone, sorted by namespace and name. A node that
// does not answer is an error beside the pods of those that do.
func (c *Client) TopPods(ctx context.Context, namespace, node string) ([]PodTop, error) {
	var out []PodTop
	err := c.eachSummary(ctx, node, func(n *Node, s *statsapi.Summary) {
		for _, p := range s.Pods {
			if namespace != "" && p.PodRef.Namespace != namespace {
				continue
			}
			pod := PodTop{Namespace: p.PodRef.Namespace, Name: p.PodRef.Name, UID: p.PodRef.UID, Node: n.Name}
			for _, ctr := range p.Containers {
				pod.Containers = append(pod.Containers, ContainerTop{Name: ctr.Name, Usage: schemas.ResourceUsage(ctr.CPU, ctr.Memory)})
			}
			slices.SortFunc(pod.Containers, func(a, b ContainerTop) int { return cmp.Compare(a.Name, b.Name) })
			out = append(out, pod)
		}
	})
	slices.SortFunc(out, func(a, b PodTop) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return out, err
}

// TopNodes is the usage of every live node, or of node alone, sorted by
// name.
func (c *Client) TopNodes(ctx context.Context, node string) ([]NodeTop, error) {
	var out []NodeTop
	err := c.eachSummary(ctx, node, func(n *Node, s *statsapi.Summary) {
		out = append(out, NodeTop{Name: n.Name, Usage: schemas.ResourceUsage(s.Node.CPU, s.Node.Memory), Allocatable: n.Record.Allocatable})
	})
	slices.SortFunc(out, func(a, b NodeTop) int { return cmp.Compare(a.Name, b.Name) })
	return out, err
}

// eachSummary asks every live node (or node) for its Summary at once, once
// more after TopSampleWindow when it has no CPU rate for something, and
// hands fn each answer, one at a time.
func (c *Client) eachSummary(ctx context.Context, node string, fn func(*Node, *statsapi.Summary)) error {
	nodes, err := c.NodesOf(ctx, node, nil)
	if err != nil {
		return err
	}
	now := time.Now()
	nodes = slices.DeleteFunc(nodes, func(n *Node) bool { return !n.Live(now) })
	if node != "" && len(nodes) == 0 {
		return errorOf(ErrNotFound, nil, "node %s is not live: its usage cannot be asked", node)
	}
	var (
		mu   sync.Mutex // guards errs and fn's calls
		errs []error
		wg   sync.WaitGroup
	)
	for _, n := range nodes {
		wg.Go(func() {
			s, err := c.Stats(ctx, n.Name)
			if err == nil && !hasRates(s) {
				select {
				case <-ctx.Done():
					err = ctx.Err()
				case <-time.After(TopSampleWindow):
					s, err = c.Stats(ctx, n.Name)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			fn(n, s)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hasRates says whether the Summary has the CPU rate of the node and of
// every container it measured.
func hasRates(s *statsapi.Summary) bool {
	if s.Node.CPU == nil || s.Node.CPU.UsageNanoCores == nil {
		return false
	}
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			if c.CPU != nil && c.CPU.UsageNanoCores == nil {
				return false
			}
		}
	}
	return true
}
