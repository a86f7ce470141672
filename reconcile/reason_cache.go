package reconcile

import (
	"sync"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// reasonCache keeps, per pod and container, why the container's last start
// failed (CrashLoopBackOff, ErrImagePull, ...), as kubelet's reasonCache: the
// status shows such a container as Waiting with that reason until a start
// succeeds.
type reasonCache struct {
	mu sync.Mutex
	m  map[string]startFailure
}

type startFailure struct {
	err     error
	message string
}

func newReasonCache() *reasonCache { return &reasonCache{m: map[string]startFailure{}} }

func reasonKey(uid, container string) string { return uid + "/" + container }

func (c *reasonCache) set(uid, container string, err error, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[reasonKey(uid, container)] = startFailure{err, msg}
}

func (c *reasonCache) remove(uid, container string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, reasonKey(uid, container))
}

func (c *reasonCache) get(uid, container string) (startFailure, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[reasonKey(uid, container)]
	return f, ok
}

// resizeKey stands for the pod, not a container (a container's name is
// never empty): the failure of its last resize, which its
// PodResizeInProgress condition shows until a resize succeeds.
const resizeKey = ""

func (c *reasonCache) setResizeError(uid, msg string) {
	c.set(uid, resizeKey, kubecontainer.ErrResize, msg)
}

func (c *reasonCache) clearResizeError(uid string) { c.remove(uid, resizeKey) }

// resizeError is the message of the pod's last failed resize, if the
// failure stands.
func (c *reasonCache) resizeError(uid string) (string, bool) {
	f, ok := c.get(uid, resizeKey)
	return f.message, ok
}

func (c *reasonCache) forgetPod(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := uid + "/"
	for k := range c.m {
		if len(k) > len(p) && k[:len(p)] == p {
			delete(c.m, k)
		}
	}
}
