package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/yaml"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		os.Exit(1)
	}
}

// run places the pods of the manifest on stdin (YAML or JSON documents) and
// prints one line a pod; it fails when any pod found no node.
func run(ctx context.Context, args []string, stdin io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	url := fs.String("nats-url", client.DefaultURL, "the fleet's NATS")
	dataDir := fs.String("data-dir", "", "the data dir of a jetlet run whose NATS seed to present (default ./jetlet-data)")
	parallel := fs.Int("parallel", 16, "pods placed at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *parallel < 1 {
		return fmt.Errorf("--parallel %d: want at least 1", *parallel)
	}
	pods, err := readPods(stdin)
	if err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	c, err := client.Connect(ctx, client.Options{URL: *url, DataDir: *dataDir, Name: "scheduler"})
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := newScheduler(ctx, c)
	if err != nil {
		return err
	}
	// A failed watch ends the placing: a pod waiting for a record would wait for ever.
	ctx, stopWatch := context.WithCancelCause(ctx)
	defer stopWatch(nil)
	go func() { stopWatch(fmt.Errorf("node watch: %w", c.WatchNodes(ctx, s.update))) }()

	var wg sync.WaitGroup
	var mu sync.Mutex // guards out and failed
	failed := 0
	sem := make(chan struct{}, *parallel)
	for _, pod := range pods {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			node, refused, err := s.place(ctx, pod)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				node = err.Error()
			}
			fmt.Fprintf(out, "pod/%s/%s: %s%s\n", pod.Namespace, pod.Name, node, strings.Join(refused, ""))
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d pods not placed", failed, len(pods))
	}
	return nil
}

// readPods decodes every Pod of a manifest.
func readPods(r io.Reader) ([]*corev1.Pod, error) {
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	var pods []*corev1.Pod
	for {
		pod := &corev1.Pod{}
		err := dec.Decode(pod)
		if errors.Is(err, io.EOF) {
			return pods, nil
		}
		switch {
		case err != nil:
			return nil, err
		case pod.Kind != "Pod" || pod.Name == "":
			return nil, fmt.Errorf("document %d: want a Pod with a name, got kind %q name %q", len(pods)+1, pod.Kind, pod.Name)
		}
		if pod.Namespace == "" {
			pod.Namespace = "default"
		}
		pods = append(pods, pod)
	}
}

// scheduler is the fleet as the scheduler sees it: the nodes' records, and
// the pods it placed that a node's record may not count yet (kube-scheduler's
// assumed pods). A record stamped after a pod's result counts it; a pod still
// waiting for its result is counted until then.
type scheduler struct {
	c       *client.Client
	mu      sync.Mutex                        // guards nodes, assumed and changed
	nodes   map[string]*client.Node           // the newest records, by node
	assumed map[string]map[string]*assumedPod // the pods placed on each node, by namespace/name
	changed chan struct{}                     // closed and replaced at each record
}

type assumedPod struct {
	requests corev1.ResourceList
	answered time.Time // the result's FinishedAt (the node's clock); zero while waiting
}

// newScheduler starts from the nodes as they are now.
func newScheduler(ctx context.Context, c *client.Client) (*scheduler, error) {
	nodes, err := c.Nodes(ctx, "")
	if err != nil {
		return nil, err
	}
	s := &scheduler{c: c, nodes: map[string]*client.Node{}, assumed: map[string]map[string]*assumedPod{}, changed: make(chan struct{})}
	for _, n := range nodes {
		s.update(n) //nolint:errcheck // never fails
	}
	return s, nil
}

// update takes a node's new record (client.WatchNodes), and forgets the pods it counts.
func (s *scheduler) update(n *client.Node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[n.Name] = n
	close(s.changed)
	s.changed = make(chan struct{})
	for key, a := range s.assumed[n.Name] {
		if n.Record != nil && !a.answered.IsZero() && n.Record.HeartbeatAt.After(a.answered) {
			delete(s.assumed[n.Name], key)
		}
	}
	return nil
}

// place applies pod to the best node that admits it, to the next when that
// node refuses it for want of resources (a record behind, another writer: the
// node's verdict is final), and says which refused it (" (n1 refused: OutOfpods)").
func (s *scheduler) place(ctx context.Context, pod *corev1.Pod) (string, []string, error) {
	refused := map[string]string{}
	var said []string
	key := pod.Namespace + "/" + pod.Name
	for {
		node, wait, err := s.pick(pod, key, refused)
		if err != nil {
			return "", said, err
		} else if wait != nil {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", said, ctx.Err()
			}
		}
		in, err := s.c.Apply(ctx, node, pod.DeepCopy())
		var res *client.Result
		if err == nil {
			res, err = s.c.Wait(ctx, in, client.WaitOptions{})
		}
		var rej *client.RejectedError
		if err != nil {
			s.mu.Lock()
			delete(s.assumed[node], key) // not placed there
			s.mu.Unlock()
			if !errors.As(err, &rej) || !strings.HasPrefix(rej.Reason(), "OutOf") {
				return "", said, fmt.Errorf("on %s: %w", node, err)
			}
			refused[node] = rej.Reason()
			said = append(said, " ("+node+" refused: "+rej.Reason()+")")
			continue
		}
		s.mu.Lock()
		s.assumed[node][key].answered = res.FinishedAt
		s.mu.Unlock()
		if res.Outcome != schemas.OutcomeSynced {
			return node, said, fmt.Errorf("on %s: %s: %s", node, res.Outcome, res.Error)
		}
		return node, said, nil
	}
}

// pick chooses the node for pod among those that admit it and have not
// refused it, and assumes pod there, so that the workers placing other pods
// meanwhile count it. When none admits it while pods are assumed, it returns
// the channel closed at the next record, which may count them (as
// kube-scheduler requeues a pod on a node's update).
func (s *scheduler) pick(pod *corev1.Pod, key string, refused map[string]string) (string, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var best, why []string
	bestScore := int64(-1)
	for name, n := range s.nodes {
		view := s.withAssumed(n)
		ok, reason, _ := view.Admits(pod, time.Now())
		if r, was := refused[name]; was {
			ok, reason = false, r
		}
		if !ok {
			why = append(why, name+": "+reason)
			continue
		}
		switch score := leastAllocated(view.Record, requests); {
		case score > bestScore:
			best, bestScore = []string{name}, score
		case score == bestScore:
			best = append(best, name)
		}
	}
	if len(best) == 0 {
		for _, a := range s.assumed {
			if len(a) > 0 {
				return "", s.changed, nil
			}
		}
		sort.Strings(why)
		return "", nil, fmt.Errorf("0/%d nodes admit it: %s", len(s.nodes), strings.Join(why, ", "))
	}
	node := best[rand.IntN(len(best))] // ties broken at random, as kube-scheduler's selectHost
	if s.assumed[node] == nil {
		s.assumed[node] = map[string]*assumedPod{}
	}
	s.assumed[node][key] = &assumedPod{requests: requests}
	return node, nil, nil
}

// withAssumed is n with the pods assumed on it added to its record's
// allocated, one pod each. Called with s.mu held.
func (s *scheduler) withAssumed(n *client.Node) *client.Node {
	if n.Record == nil || len(s.assumed[n.Name]) == 0 {
		return n
	}
	sum := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(len(s.assumed[n.Name])), resource.DecimalSI)}
	lists := []corev1.ResourceList{n.Record.Allocated}
	for _, a := range s.assumed[n.Name] {
		lists = append(lists, a.requests)
	}
	for _, l := range lists {
		for name, q := range l {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
	}
	rec := *n.Record
	rec.Allocated = sum
	view := *n
	view.Record = &rec
	return &view
}

// leastAllocated is NodeResourcesFit's LeastAllocated score of a node for a
// pod, 0 to 100: cpu and memory, weight 1 each, each (allocatable -
// requested) × 100 / allocatable, requested being what the node holds and the
// pod asks; a pod that asks none counts 100m and 200Mi, as kube-scheduler's
// GetNonzeroRequests, so that such pods spread too.
func leastAllocated(rec *schemas.NodeRecord, requests corev1.ResourceList) int64 {
	var sum int64
	for r, fallback := range map[corev1.ResourceName]string{corev1.ResourceCPU: "100m", corev1.ResourceMemory: "200Mi"} {
		pod := requests[r]
		if pod.IsZero() {
			pod = resource.MustParse(fallback)
		}
		requested, allocatable := rec.Allocated[r].DeepCopy(), rec.Allocatable[r] // Add changes what it is called on
		requested.Add(pod)
		if a := allocatable.MilliValue(); a > 0 && requested.Cmp(allocatable) <= 0 {
			sum += (a - requested.MilliValue()) * 100 / a
		}
	}
	return sum / 2
}
