package kubecontainer

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetlet/jetlet/runtime/probe/outcome"
)

// HandlerOutcome is what running a probe's or a hook's handler found: OK and
// a message (see outcome.Outcome). It is an alias so that runtime/probe can
// implement HandlerRunner without importing anything under reconcile.
type HandlerOutcome = outcome.Outcome

// HandlerRunner runs the handlers of probes and lifecycle hooks against a
// running container, as kubelet's prober and lifecycle handler runner do. Its
// arguments are resolved already (ResolveHTTPGet, ResolveTCPSocket,
// ResolveGRPC: a named port is a number, an empty host is the pod's IP). An
// error is a handler that could not be run at all (the container is gone, the
// context ended); a handler that ran and failed is an outcome that is not OK.
// The implementation lives outside reconcile (runtime/probe), since the gRPC
// health check needs a gRPC client.
type HandlerRunner interface {
	Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (HandlerOutcome, error)
	HTTPGet(ctx context.Context, u *url.URL, header http.Header, timeout time.Duration) (HandlerOutcome, error)
	TCPSocket(ctx context.Context, hostPort string, timeout time.Duration) (HandlerOutcome, error)
	GRPC(ctx context.Context, hostPort, service string, timeout time.Duration) (HandlerOutcome, error)
}

// ResolveHTTPGet turns an httpGet action of container (a probe's or a hook's)
// into the URL and headers to send, as kubelet's formatURL and
// NewRequestForHTTPGetAction: scheme HTTP or HTTPS (default HTTP), host the
// action's or else podIP, the port by number or by the name of one of the
// container's ports, the path as written (with its query).
func ResolveHTTPGet(action *corev1.HTTPGetAction, container *corev1.Container, podIP string) (*url.URL, http.Header, error) {
	port, err := ResolvePort(action.Port, container)
	if err != nil {
		return nil, nil, err
	}
	host := action.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(action.Path)
	if err != nil {
		u = &url.URL{Path: action.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	header := http.Header{}
	for _, h := range action.HTTPHeaders {
		header.Add(h.Name, h.Value)
	}
	return u, header, nil
}

// ResolveTCPSocket gives the host:port a tcpSocket action of container dials:
// the action's host or else podIP, the port by number or name.
func ResolveTCPSocket(action *corev1.TCPSocketAction, container *corev1.Container, podIP string) (string, error) {
	port, err := ResolvePort(action.Port, container)
	if err != nil {
		return "", err
	}
	host := action.Host
	if host == "" {
		host = podIP
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// ResolveGRPC gives the host:port and service name of a grpc probe: always the
// pod's IP (the action has no host), the empty service meaning the server's
// overall health.
func ResolveGRPC(action *corev1.GRPCAction, podIP string) (hostPort, service string) {
	if action.Service != nil {
		service = *action.Service
	}
	return net.JoinHostPort(podIP, strconv.Itoa(int(action.Port))), service
}

// ResolvePort gives a probe's or hook's port as a number: a number as it is
// (1-65535), a name as the containerPort of the container's port of that
// name, and a string of digits as the number (kubelet's lifecycle handler
// accepts it).
func ResolvePort(port intstr.IntOrString, container *corev1.Container) (int, error) {
	n := port.IntValue()
	if port.Type == intstr.String {
		n = 0
		for _, p := range container.Ports {
			if p.Name == port.StrVal {
				n = int(p.ContainerPort)
				break
			}
		}
		if n == 0 {
			if d, err := strconv.Atoi(port.StrVal); err == nil {
				n = d
			} else {
				return 0, fmt.Errorf("container %q has no port named %q", container.Name, port.StrVal)
			}
		}
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s of container %q is out of range 1-65535", port.String(), container.Name)
	}
	return n, nil
}
