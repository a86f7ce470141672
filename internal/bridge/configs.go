package bridge

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/jetlet/jetlet/client"
)

// configRef names a ConfigMap or a Secret.
type configRef struct {
	secret          bool
	namespace, name string
}

// podConfigRefs are the ConfigMaps and Secrets pod refers to: its
// volumes' (projected ones' too), its containers' env and envFrom, and its
// image pull secrets.
func podConfigRefs(pod *corev1.Pod) []configRef {
	seen := map[configRef]bool{}
	add := func(secret bool, name string) {
		if name != "" {
			seen[configRef{secret: secret, namespace: pod.Namespace, name: name}] = true
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			add(false, v.ConfigMap.Name)
		}
		if v.Secret != nil {
			add(true, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(false, s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add(true, s.Secret.Name)
				}
			}
		}
	}
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	for _, e := range pod.Spec.EphemeralContainers {
		containers = append(containers, corev1.Container(e.EphemeralContainerCommon))
	}
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add(false, e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				add(true, e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add(false, r.Name)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add(true, r.Name)
			}
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(true, s.Name)
	}
	return slices.Collect(maps.Keys(seen))
}

// configCopier copies the ConfigMaps and Secrets bridged pods use into the
// bus's buckets (a Secret sealed for the nodes of the pods that use it,
// and only those) and copies them again when they change.
type configCopier struct {
	jetlet     *client.Client
	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister

	// mu guards users and copied: the nodes' pod workers write them, the
	// informers' handlers read them.
	mu sync.Mutex
	// users are the pods that use each object, by node.
	users map[configRef]map[string]map[types.UID]bool
	// copied is the resourceVersion of each object last copied for each
	// node: the pods that share one (kube-root-ca.crt) copy it once.
	copied map[configRef]map[string]string
}

func newConfigCopier(jetlet *client.Client, configMaps corev1listers.ConfigMapLister, secrets corev1listers.SecretLister) *configCopier {
	return &configCopier{jetlet: jetlet, configMaps: configMaps, secrets: secrets,
		users: map[configRef]map[string]map[types.UID]bool{}, copied: map[configRef]map[string]string{}}
}

// use records that pod on node uses what it refers to, and copies each
// object there is: the node reads them before it starts the pod. One not
// there yet is copied when it comes.
func (c *configCopier) use(ctx context.Context, node string, pod *corev1.Pod) error {
	refs := podConfigRefs(pod)
	c.mu.Lock()
	for _, r := range refs {
		if c.users[r] == nil {
			c.users[r] = map[string]map[types.UID]bool{}
		}
		if c.users[r][node] == nil {
			c.users[r][node] = map[types.UID]bool{}
		}
		c.users[r][node][pod.UID] = true
	}
	c.mu.Unlock()
	for _, r := range refs {
		if err := c.copy(ctx, r, []string{node}); err != nil {
			return err
		}
	}
	return nil
}

// forget records that pod on node is gone.
func (c *configCopier) forget(node string, pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range podConfigRefs(pod) {
		delete(c.users[r][node], pod.UID)
		if len(c.users[r][node]) == 0 {
			delete(c.users[r], node)
		}
		if len(c.users[r]) == 0 {
			delete(c.users, r)
		}
	}
}

// nodesUsing are the nodes with a pod that uses r.
func (c *configCopier) nodesUsing(r configRef) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.users[r]))
}

// copy stores r as the API server has it now, unless that version is
// stored for each of nodes already: a ConfigMap once, a Secret sealed for
// each of nodes. One the API server does not have is left.
func (c *configCopier) copy(ctx context.Context, r configRef, nodes []string) error {
	if len(nodes) == 0 { // an object no bridged pod uses: most of the cluster's
		return nil
	}
	var obj metav1.Object
	var err error
	if r.secret {
		obj, err = c.secrets.Secrets(r.namespace).Get(r.name)
	} else {
		obj, err = c.configMaps.ConfigMaps(r.namespace).Get(r.name)
	}
	if err != nil {
		return nil // not there (yet): the node says FailedMount and waits
	}
	version := obj.GetResourceVersion()
	c.mu.Lock()
	nodes = slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return c.copied[r][n] == version })
	c.mu.Unlock()
	if len(nodes) == 0 {
		return nil
	}
	if err := c.store(ctx, obj, nodes); err != nil {
		return err
	}
	c.mu.Lock()
	if c.copied[r] == nil {
		c.copied[r] = map[string]string{}
	}
	for _, n := range nodes {
		c.copied[r][n] = version
	}
	c.mu.Unlock()
	return nil
}

// store puts obj, a ConfigMap or a Secret, in the bus's bucket: a Secret
// sealed for each of nodes.
func (c *configCopier) store(ctx context.Context, obj metav1.Object, nodes []string) error {
	var writes []*client.ConfigWrite
	var err error
	if s, ok := obj.(*corev1.Secret); ok {
		if writes, err = c.jetlet.PrepareSecret(ctx, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels},
			Type:       s.Type, Data: s.Data, Immutable: s.Immutable,
		}, nodes, false); err != nil {
			return err
		}
	} else {
		cm := obj.(*corev1.ConfigMap)
		w, err := c.jetlet.PrepareConfigMap(ctx, &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, Labels: cm.Labels},
			Data:       cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable,
		}, false)
		if err != nil {
			return err
		}
		writes = []*client.ConfigWrite{w}
	}
	return c.jetlet.StoreConfigs(ctx, writes)
}

// handler copies an object that a bridged pod uses again when it is made
// or changed.
func (c *configCopier) handler(ctx context.Context, secret bool) cache.ResourceEventHandler {
	changed := func(obj any) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		r := configRef{secret: secret, namespace: m.GetNamespace(), name: m.GetName()}
		if err := c.copy(ctx, r, c.nodesUsing(r)); err != nil {
			kind := "configmap"
			if secret {
				kind = "secret"
			}
			zerolog.Ctx(ctx).Warn().Err(err).Str(kind, r.namespace+"/"+r.name).Msg("copying to the bus")
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) }}
}
