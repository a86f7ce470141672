package agent

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/eviction"
	"github.com/jetlet/jetlet/reconcile/nodeshutdown"
	"github.com/jetlet/jetlet/reconcile/nodestatus"
	"github.com/jetlet/jetlet/schemas"
)

// nodeInfo is what the node is, for admission and for its record in
// jetlet_nodes: fixed at start (capacity, allocatable, labels, taints,
// addresses, the Pod Security level) but for its cordon. Read only once
// built; the cordon guards itself.
type nodeInfo struct {
	name        string
	capacity    corev1.ResourceList
	allocatable corev1.ResourceList
	// swapCapacity is the machine's swap in bytes (0: none).
	swapCapacity int64
	labels       map[string]string
	taints       []corev1.Taint
	addresses    []corev1.NodeAddress
	level        admission.Level
	// xkey opens the Secrets sealed for this node; xkeyPub, its public
	// key, is the record's xkey.
	xkey    nkeys.KeyPair
	xkeyPub string
	cordon  *cordon
}

// newNode reads the machine's capacity and the node's curve key (made on
// first start) and makes the node the flags describe.
func newNode(cfg runConfig, ip string) (*nodeInfo, error) {
	capacity, err := nodestatus.ReadCapacity(cfg.dataDir, cfg.nodeStatus.maxPods)
	if err != nil {
		return nil, err
	}
	swapCapacity, err := nodestatus.ReadSwapCapacity()
	if err != nil {
		return nil, err
	}
	xkey, err := LoadOrCreateNodeKey(nodeKeyPath(cfg.dataDir))
	if err != nil {
		return nil, err
	}
	xkeyPub, err := xkey.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("node xkey: %w", err)
	}
	cordon, err := loadCordon(cfg.dataDir)
	if err != nil {
		return nil, err
	}
	n := &nodeInfo{
		name:         cfg.node,
		capacity:     capacity,
		swapCapacity: swapCapacity,
		allocatable: nodestatus.Allocatable(capacity, append(cfg.nodeStatus.reserved,
			eviction.HardEvictionReservation(cfg.nodeStatus.thresholds, capacity))...),
		labels:    nodestatus.Labels(cfg.node, cfg.nodeStatus.labels),
		taints:    cfg.nodeStatus.taintSet,
		level:     cfg.nodeStatus.level,
		addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: cfg.node}},
		xkey:      xkey,
		xkeyPub:   xkeyPub,
		cordon:    cordon,
	}
	if ip != "" {
		n.addresses = append([]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}, n.addresses...)
	}
	return n, nil
}

// forAdmission is the node as admission sees it, under pressure, and
// shutting down or not.
func (n *nodeInfo) forAdmission(pressure []corev1.NodeConditionType, shuttingDown bool) admission.Node {
	return admission.Node{
		Name:          n.name,
		Labels:        n.labels,
		Taints:        n.taints,
		Unschedulable: n.cordon.On(),
		ShuttingDown:  shuttingDown,
		Allocatable:   n.allocatable,
		Conditions:    pressure,
		PodSecurity:   n.level,
	}
}

// record fills in the node's status in its record: allocated is what the
// admitted pods hold now, pressure the eviction manager's conditions,
// network the runtime's NetworkUnavailable (nil: not known yet), readySince
// when jetlet started, shutdownSince when the host began to shut down (zero:
// it is not; the node is not Ready meanwhile, as kubelet's).
func (n *nodeInfo) record(rec *schemas.NodeRecord, allocated corev1.ResourceList, pressure []schemas.NodeCondition, network *schemas.NodeCondition, readySince, shutdownSince time.Time) {
	rec.Labels = maps.Clone(n.labels)
	rec.Taints = slices.Clone(n.taints)
	rec.Unschedulable = n.cordon.On()
	rec.Capacity = n.capacity.DeepCopy()
	rec.Swap = &corev1.NodeSwapStatus{Capacity: &n.swapCapacity}
	rec.Allocatable = n.allocatable.DeepCopy()
	rec.Allocated = allocated
	rec.Addresses = slices.Clone(n.addresses)
	rec.XKey = n.xkeyPub
	ready := schemas.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "jetlet is posting ready status", LastTransitionTime: readySince,
	}
	if !shutdownSince.IsZero() {
		ready.Status, ready.Reason, ready.Message, ready.LastTransitionTime = corev1.ConditionFalse,
			nodeshutdown.NotReadyReason, nodeshutdown.NotReadyMessage, shutdownSince
	}
	rec.Conditions = append([]schemas.NodeCondition{ready}, pressure...)
	if network != nil {
		rec.Conditions = append(rec.Conditions, *network)
	}
}
