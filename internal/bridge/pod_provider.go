package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// nodePods is virtual-kubelet's pod provider for one node: each pod bound
// to the node becomes an intent on the bus (the Kubernetes uid; a new
// revision for each change; a delete with the pod's grace period), and
// each status the node writes goes back to the pod.
type nodePods struct {
	node    string
	jetlet  *client.Client
	kube    kubernetes.Interface
	pods    corev1listers.PodLister    // the Node's pods, from its informer
	record  func() *schemas.NodeRecord // the node's latest
	configs *configCopier              // the bridge's
	tokens  *tokenIssuer               // the bridge's

	// mu guards the fields below: virtual-kubelet's workers call the
	// provider, the status watch (watchStatuses) writes statuses.
	mu sync.Mutex
	// published is each pod the bridge published, by namespace/name, as
	// published: what GetPod answers and virtual-kubelet compares with the
	// pod to decide an update.
	published map[string]*publishedPod
	statuses  map[types.UID]*schemas.PodStatus // the node's latest, by uid
	notify    func(*corev1.Pod)                // virtual-kubelet's, nil before
}

type publishedPod struct {
	pod      *corev1.Pod
	revision int64
}

var (
	_ node.PodLifecycleHandler = (*nodePods)(nil)
	_ node.PodNotifier         = (*nodePods)(nil)
)

func newNodePods(nodeName string, jetlet *client.Client, kube kubernetes.Interface, pods corev1listers.PodLister, record func() *schemas.NodeRecord, configs *configCopier, tokens *tokenIssuer) *nodePods {
	return &nodePods{node: nodeName, jetlet: jetlet, kube: kube, pods: pods, record: record, configs: configs, tokens: tokens,
		published: map[string]*publishedPod{}, statuses: map[types.UID]*schemas.PodStatus{}}
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// intentPod is pod as an intent carries it: its spec and the metadata the
// node uses, without what the API server keeps for itself.
func intentPod(pod *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			Labels: pod.Labels, Annotations: pod.Annotations, OwnerReferences: pod.OwnerReferences,
			Generation: pod.Generation, CreationTimestamp: pod.CreationTimestamp,
		},
		Spec: *pod.Spec.DeepCopy(), // the token sources are rewritten
	}
}

// CreatePod publishes the pod's first intent, at its generation.
func (p *nodePods) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	return p.apply(ctx, pod, max(pod.Generation, 1))
}

// UpdatePod publishes the pod's next revision.
func (p *nodePods) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	revision, err := p.nextRevision(ctx, pod)
	if err != nil {
		return err
	}
	return p.apply(ctx, pod, revision)
}

// apply copies the ConfigMaps and Secrets pod uses to the bus and issues
// its service account tokens, then publishes its intent at revision.
func (p *nodePods) apply(ctx context.Context, pod *corev1.Pod, revision int64) error {
	if err := p.configs.use(ctx, p.node, pod); err != nil {
		return err
	}
	body := intentPod(pod)
	if err := p.tokens.project(ctx, p.node, p.record().XKey, body); err != nil {
		return err
	}
	in, err := client.ApplyIntent(p.node, body, revision)
	if err != nil {
		return errdefs.AsInvalidInput(err)
	}
	if err := p.jetlet.Publish(ctx, in); err != nil {
		return err
	}
	p.mu.Lock()
	p.published[podKey(pod.Namespace, pod.Name)] = &publishedPod{pod: body, revision: revision}
	p.mu.Unlock()
	return nil
}

// DeletePod publishes the pod's delete intent with its deletion's grace
// period (the pod's own when the deletion gave none).
func (p *nodePods) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	revision, err := p.nextRevision(ctx, pod)
	if err != nil {
		return err
	}
	in, err := client.DeleteIntent(&client.Pod{Node: p.node, UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name}, revision, pod.DeletionGracePeriodSeconds)
	if err != nil {
		return errdefs.AsInvalidInput(err)
	}
	if err := p.jetlet.Publish(ctx, in); err != nil {
		return err
	}
	p.mu.Lock()
	if pp := p.published[podKey(pod.Namespace, pod.Name)]; pp != nil && pp.pod.UID == pod.UID {
		pp.revision = revision
	}
	p.mu.Unlock()
	return nil
}

// nextRevision is one above the pod's last published revision: the one
// this bridge published, or after a restart the newest intent's on the
// bus.
func (p *nodePods) nextRevision(ctx context.Context, pod *corev1.Pod) (int64, error) {
	p.mu.Lock()
	pp := p.published[podKey(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if pp != nil && pp.pod.UID == pod.UID {
		return pp.revision + 1, nil
	}
	intents, err := p.jetlet.Intents(ctx, p.node, string(pod.UID), true)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		return 0, fmt.Errorf("the revisions of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	revision := max(pod.Generation, 1)
	for _, in := range intents {
		revision = max(revision, in.Revision+1)
	}
	return revision, nil
}

// GetPod is the pod as published, with the node's status.
func (p *nodePods) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.published[podKey(namespace, name)]
	if pp == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on node %s", namespace, name, p.node)
	}
	pod := pp.pod.DeepCopy()
	if st := p.statuses[pod.UID]; st != nil {
		pod.Status = statusOf(pod, st, hostIPsOf(p.record()))
	}
	return pod, nil
}

// GetPodStatus is the node's status of the pod.
func (p *nodePods) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods are the pods this bridge published to the node: a pod applied
// there by other means is not the bridge's to delete.
func (p *nodePods) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.published))
	for _, pp := range p.published {
		out = append(out, pp.pod.DeepCopy())
	}
	return out, nil
}

// NotifyPods takes virtual-kubelet's callback for statuses.
func (p *nodePods) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
}

// watchStatuses hands each status the node writes to its pod until ctx
// ends.
func (p *nodePods) watchStatuses(ctx context.Context) error {
	return p.jetlet.WatchStatuses(ctx, p.node, func(statuses []schemas.PodStatus, _ bool) error {
		for i := range statuses {
			p.onStatus(ctx, &statuses[i])
		}
		return nil
	})
}

// onStatus takes in one status of the node: the pod of its uid gets it;
// a pod being deleted whose containers are gone is deleted for good, as
// kubelet does once it has stopped a pod.
func (p *nodePods) onStatus(ctx context.Context, st *schemas.PodStatus) {
	pod, err := p.pods.Pods(st.Namespace).Get(st.Name)
	if err != nil || string(pod.UID) != st.UID {
		return // not (or no longer) this Node's pod
	}
	terminated := st.Phase == schemas.PhaseTerminated
	p.mu.Lock()
	notify := p.notify
	if terminated {
		delete(p.statuses, pod.UID)
		key := podKey(pod.Namespace, pod.Name)
		if pp := p.published[key]; pp != nil && pp.pod.UID == pod.UID {
			delete(p.published, key)
		}
	} else {
		p.statuses[pod.UID] = st
	}
	p.mu.Unlock()
	if terminated { // outside p.mu: the copier and the issuer have locks of their own
		p.configs.forget(p.node, pod)
		p.tokens.forget(pod.UID)
	}
	withStatus := pod.DeepCopy()
	withStatus.Status = statusOf(pod, st, hostIPsOf(p.record()))
	if notify != nil {
		notify(withStatus)
	}
	if terminated && pod.DeletionTimestamp != nil {
		p.deleteStopped(ctx, pod)
	}
}

// deleteStopped removes a stopped pod from the API server (grace 0, this
// uid only), kubelet's last word on a deleted pod.
func (p *nodePods) deleteStopped(ctx context.Context, pod *corev1.Pod) {
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	err := p.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		zerolog.Ctx(ctx).Warn().Err(err).Str("pod", podKey(pod.Namespace, pod.Name)).Msg("deleting a stopped pod")
	}
}

// hostIPsOf are a record's addresses as a pod's hostIPs: its first
// internal (else external) address, then one of the other IP family, as
// the API server allows.
func hostIPsOf(rec *schemas.NodeRecord) []string {
	var ips []string
	family := func(ip string) bool { return strings.Contains(ip, ":") }
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range rec.Addresses {
			if a.Type == typ && net.ParseIP(a.Address) != nil && !slices.ContainsFunc(ips, func(ip string) bool { return family(ip) == family(a.Address) }) {
				ips = append(ips, a.Address)
			}
		}
	}
	return ips
}
