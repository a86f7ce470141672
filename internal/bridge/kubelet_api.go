package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// kubeletAPI is one bridged node's kubelet API, what kube-apiserver calls
// for `kubectl logs`, `exec`, `attach` and `port-forward`, and
// metrics-server for usage: virtual-kubelet's handlers, each call carried
// to the node over the bus by the client package. It trusts a caller by
// its client certificate (verified by the TLS config against the
// cluster's CA) and asks the API server, as kubelet's webhook authorizer
// does, whether that user may reach the node (nodes/proxy, nodes/stats,
// nodes/metrics).
type kubeletAPI struct {
	node   string
	kube   kubernetes.Interface
	jetlet *client.Client
}

func (a *kubeletAPI) handler() http.Handler {
	return a.authorize(api.PodHandler(api.PodHandlerConfig{
		GetContainerLogs:      a.logs,
		RunInContainer:        a.exec,
		AttachToContainer:     a.attach,
		PortForward:           a.portForward,
		GetPodsFromKubernetes: a.pods,
		GetStatsSummary:       func(ctx context.Context) (*statsv1alpha1.Summary, error) { return a.jetlet.Stats(ctx, a.node) },
		GetMetricsResource:    a.metricsResource,
	}, false))
}

// authorize lets a request through when its client certificate's user
// may reach the node, as kubelet maps paths to subresources, and the pod
// it names is the node's.
func (a *kubeletAPI) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized: a client certificate of the cluster's CA is required", http.StatusUnauthorized)
			return
		}
		cert := r.TLS.VerifiedChains[0][0]
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		subresource := "proxy"
		switch parts[0] {
		case "stats":
			subresource = "stats"
		case "metrics":
			subresource = "metrics"
		}
		verb := "get"
		if r.Method == http.MethodPost {
			verb = "create"
		}
		review, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User: cert.Subject.CommonName, Groups: cert.Subject.Organization,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: subresource, Name: a.node},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !review.Status.Allowed {
			http.Error(w, fmt.Sprintf("Forbidden: user %s may not %s nodes/%s of %s", cert.Subject.CommonName, verb, subresource, a.node), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// pod is the bus's name of a pod of the API server on this node: its
// node and uid. A pod of another node is not found here.
func (a *kubeletAPI) pod(ctx context.Context, namespace, name string) (*client.Pod, error) {
	pod, err := a.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errdefs.AsNotFound(err)
	}
	if err != nil {
		return nil, err
	}
	if pod.Spec.NodeName != a.node {
		return nil, errdefs.NotFoundf("pod %s/%s is not on node %s", namespace, name, a.node)
	}
	return &client.Pod{Node: a.node, UID: string(pod.UID), Namespace: namespace, Name: name}, nil
}

// pods are the pods bound to the node.
func (a *kubeletAPI) pods(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := a.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", a.node).String()})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (a *kubeletAPI) logs(ctx context.Context, namespace, name, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	p, err := a.pod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	req := schemas.LogsRequest{PodRef: p.Ref(container), Follow: opts.Follow, Previous: opts.Previous, Timestamps: opts.Timestamps}
	if opts.Tail > 0 {
		req.TailLines = new(int64(opts.Tail))
	}
	switch {
	case !opts.SinceTime.IsZero():
		req.SinceTime = &opts.SinceTime
	case opts.SinceSeconds > 0:
		req.SinceTime = new(time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second))
	}
	r, w := io.Pipe()
	go func() {
		// The handler closes r when done, which ends the copy.
		w.CloseWithError(a.jetlet.Logs(ctx, p, req, w))
	}()
	if opts.LimitBytes > 0 {
		return readCloser{io.LimitReader(r, int64(opts.LimitBytes)), r}, nil
	}
	return r, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

func (a *kubeletAPI) exec(ctx context.Context, namespace, name, container string, cmd []string, attach api.AttachIO) error {
	return a.stream(ctx, namespace, name, schemas.StreamRequest{Kind: schemas.StreamExec, Command: cmd}, container, attach)
}

func (a *kubeletAPI) attach(ctx context.Context, namespace, name, container string, attach api.AttachIO) error {
	return a.stream(ctx, namespace, name, schemas.StreamRequest{Kind: schemas.StreamAttach}, container, attach)
}

// stream runs an exec or an attach joined to attach's streams; a non-zero
// exit is an ExitError, which the handler passes on as kubelet does.
func (a *kubeletAPI) stream(ctx context.Context, namespace, name string, req schemas.StreamRequest, container string, attach api.AttachIO) error {
	p, err := a.pod(ctx, namespace, name)
	if err != nil {
		return err
	}
	req.PodRef = p.Ref(container)
	sio := client.StreamIO{Stdout: io.Discard, Stderr: io.Discard}
	if in := attach.Stdin(); in != nil {
		req.Stdin, sio.Stdin = true, in
	}
	if out := attach.Stdout(); out != nil {
		sio.Stdout = out
	}
	if errOut := attach.Stderr(); errOut != nil {
		sio.Stderr = errOut
	}
	if req.TTY = attach.TTY(); req.TTY {
		sizes := make(chan schemas.TerminalSize)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case s, ok := <-attach.Resize():
					if !ok {
						return
					}
					select {
					case sizes <- schemas.TerminalSize{Width: s.Width, Height: s.Height}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		sio.Resize = sizes
	}
	exit, err := a.jetlet.Stream(ctx, p, req, sio)
	if err != nil {
		return err
	}
	if exit != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", exit), Code: int(exit)}
	}
	return nil
}

func (a *kubeletAPI) portForward(ctx context.Context, namespace, name string, port int32, stream io.ReadWriteCloser) error {
	p, err := a.pod(ctx, namespace, name)
	if err != nil {
		return err
	}
	// virtual-kubelet hands each connection over alone, not the kubectl
	// session it is part of: each is a session of its own on the node.
	return a.jetlet.PortForward(ctx, p, port, "", stream)
}

// serve serves the kubelet API on ln with a copy of tlsConfig until ctx
// ends: ServeTLS writes its server's config (NextProtos), and the nodes'
// servers share tlsConfig.
func (a *kubeletAPI) serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config) error {
	srv := &http.Server{Handler: a.handler(), TLSConfig: tlsConfig.Clone(), ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	zerolog.Ctx(ctx).Info().Str("address", ln.Addr().String()).Msg("serving the kubelet API")
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
