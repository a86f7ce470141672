package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/internal/bridge"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/kubetest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// fleet is a control plane, a bus with `jetlet run` nodes on it, and a
// `jetlet bridge` between them, each a real process.
type fleet struct {
	cp     *kubetest.ControlPlane
	url    string
	jetlet *client.Client
	nodes  map[string]*jetlettest.Process
	bridge *jetlettest.Process
}

func startFleet(t testing.TB, names ...string) *fleet {
	t.Helper()
	return startFleetOn(t, kubetest.Start(t), names...)
}

// startFleetOn is startFleet on the control plane cp.
func startFleetOn(t testing.TB, cp *kubetest.ControlPlane, names ...string) *fleet {
	t.Helper()
	f := newFleet(t, cp, names...)
	f.bridge = f.startBridge(t)
	return f
}

// newFleet is a fleet on cp without its bridge yet.
func newFleet(t testing.TB, cp *kubetest.ControlPlane, names ...string) *fleet {
	t.Helper()
	f := &fleet{cp: cp, url: natstest.RunServer(t).ClientURL(), nodes: map[string]*jetlettest.Process{}}
	for _, name := range names {
		f.nodes[name] = jetlettest.StartNode(t, f.url, name)
	}
	c, err := client.Connect(t.Context(), client.Options{URL: f.url, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f.jetlet = c
	return f
}

// startBridge starts `jetlet bridge` between the control plane and the
// bus, its kubelet API on a free port, with args added.
func (f *fleet) startBridge(t testing.TB, args ...string) *jetlettest.Process {
	t.Helper()
	return jetlettest.StartBridge(t, append([]string{"--kubeconfig", f.cp.Kubeconfig, "--nats-url", f.url, "--data-dir", t.TempDir(),
		"--kubelet-listen", "127.0.0.1:0", "--kubelet-address", "127.0.0.1", "--client-ca-file", filepath.Join(f.cp.Dir, "pki", "ca.crt")}, args...)...)
}

// node waits until the Node called name satisfies ok, and returns it.
func (f *fleet) node(t testing.TB, name, what string, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	var err error
	poll.Until(t, 3*time.Minute, func() string {
		return fmt.Sprintf("Node %s %s (error %v; last %+v)\n%s", name, what, err, n, f.bridge.Logs())
	}, func() bool {
		n, err = f.cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && ok(n)
	})
	return n
}

// schedulable waits until the Node called name is Ready and without
// taints: the node lifecycle controller takes its not-ready taint off a
// moment after the Node says Ready.
func (f *fleet) schedulable(t testing.TB, name string) {
	t.Helper()
	f.node(t, name, "Ready and untainted", func(n *corev1.Node) bool {
		return readyStatus(n) == corev1.ConditionTrue && len(n.Spec.Taints) == 0
	})
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func (f *fleet) lease(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	return f.cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
}

// Each `jetlet run` node becomes a Ready Node as its record says (labels,
// capacity, allocatable, addresses), with a Lease that the bridge renews
// while the node's heartbeat is fresh. A node whose jetlet is killed stops
// renewing: the node lifecycle controller marks its Node Ready Unknown. A
// node stopped cleanly (its record deleted) loses its Node and its Lease.
func TestEachNodeIsANodeWithALease(t *testing.T) {
	t.Parallel() // most of it waits for a killed node to go Unknown
	f := startFleet(t, "n1", "n2")
	ctx := t.Context()

	for _, name := range []string{"n1", "n2"} {
		n := f.node(t, name, "Ready", func(n *corev1.Node) bool { return readyStatus(n) == corev1.ConditionTrue })
		recorded, err := f.jetlet.GetNode(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		rec := recorded.Record
		if n.Labels[corev1.LabelHostname] != name || n.Labels[bridge.LabelBridged] != "true" || n.Labels[corev1.LabelOSStable] != rec.Labels[corev1.LabelOSStable] {
			t.Errorf("Node %s labels %v, want the record's %v and %s", name, n.Labels, rec.Labels, bridge.LabelBridged)
		}
		if !equality.Semantic.DeepEqual(n.Status.Capacity, rec.Capacity) || !equality.Semantic.DeepEqual(n.Status.Allocatable, rec.Allocatable) {
			t.Errorf("Node %s capacity %v allocatable %v, want the record's %v and %v", name, n.Status.Capacity, n.Status.Allocatable, rec.Capacity, rec.Allocatable)
		}
		if a := n.Status.Addresses; len(a) == 0 || a[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}) || n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
			t.Errorf("Node %s addresses %v, endpoints %+v: want the bridge's kubelet API", name, a, n.Status.DaemonEndpoints)
		}
		if n.Annotations[bridge.AnnotationVersion] != rec.JetletVersion {
			t.Errorf("Node %s annotations %v, want %s=%s", name, n.Annotations, bridge.AnnotationVersion, rec.JetletVersion)
		}
	}

	// The Lease is held by its node and renewed.
	first, err := f.lease(ctx, "n2")
	if err != nil {
		t.Fatal(err)
	}
	if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != "n2" {
		t.Fatalf("Lease n2 %+v, want held by n2", first.Spec)
	}
	var renewed *coordinationv1.Lease
	poll.Until(t, time.Minute, func() string {
		return fmt.Sprintf("Lease n2 renewed after %v (last %+v)", first.Spec.RenewTime, renewed)
	}, func() bool {
		renewed, err = f.lease(ctx, "n2")
		return err == nil && renewed.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	})
	if refs := renewed.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != "n2" {
		t.Errorf("Lease n2 owners %+v, want Node n2 (the Lease goes with its Node)", refs)
	}

	// A clean stop deletes the record: the Node and its Lease go.
	f.nodes["n1"].Signal(syscall.SIGTERM)
	f.nodes["n1"].Wait(time.Minute)
	poll.Until(t, time.Minute, func() string { return "Node n1 deleted\n" + f.bridge.Logs() }, func() bool {
		_, err := f.cp.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	poll.Until(t, time.Minute, poll.Msg("Lease n1 deleted with its Node"), func() bool {
		_, err := f.lease(ctx, "n1")
		return apierrors.IsNotFound(err)
	})

	// A killed jetlet leaves its record, its heartbeat stops: the Lease is
	// no longer renewed and the control plane marks the Node Unknown.
	f.nodes["n2"].Signal(syscall.SIGKILL)
	f.nodes["n2"].Wait(time.Minute)
	f.node(t, "n2", "Ready Unknown", func(n *corev1.Node) bool { return readyStatus(n) == corev1.ConditionUnknown })
	if _, err := f.cp.Client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{}); err != nil {
		t.Errorf("Node n2 of a lost node: %v, want kept", err)
	}
}
