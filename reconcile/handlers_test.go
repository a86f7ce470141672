package reconcile

import (
	"net/http"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

func TestResolveHTTPGet(t *testing.T) {
	c := &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "admin", ContainerPort: 9090}}}
	cases := []struct {
		name   string
		action corev1.HTTPGetAction
		url    string
		header http.Header
		err    bool
	}{
		{"port by number, pod IP", corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)}, "http://10.0.0.5:80/healthz", http.Header{}, false},
		{"port by name", corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("admin")}, "http://10.0.0.5:9090/ready", http.Header{}, false},
		{"port as a string of digits", corev1.HTTPGetAction{Port: intstr.FromString("81")}, "http://10.0.0.5:81", http.Header{}, false},
		{"host, scheme, query and headers", corev1.HTTPGetAction{
			Host: "example.test", Scheme: corev1.URISchemeHTTPS, Path: "/h?x=1", Port: intstr.FromString("http"),
			HTTPHeaders: []corev1.HTTPHeader{{Name: "x-token", Value: "a"}, {Name: "X-Token", Value: "b"}, {Name: "Host", Value: "vhost"}},
		}, "https://example.test:8080/h?x=1", http.Header{"X-Token": {"a", "b"}, "Host": {"vhost"}}, false},
		{"unknown port name", corev1.HTTPGetAction{Port: intstr.FromString("metrics")}, "", nil, true},
		{"port 0", corev1.HTTPGetAction{Port: intstr.FromInt32(0)}, "", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, h, err := kubecontainer.ResolveHTTPGet(&tc.action, c, "10.0.0.5")
			if tc.err {
				if err == nil {
					t.Fatalf("got %v, want an error", u)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.String() != tc.url || !reflect.DeepEqual(h, tc.header) {
				t.Fatalf("got %s %v, want %s %v", u, h, tc.url, tc.header)
			}
		})
	}
}

func TestResolveTCPSocketAndGRPC(t *testing.T) {
	c := &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "db", ContainerPort: 5432}}}
	if got, err := kubecontainer.ResolveTCPSocket(&corev1.TCPSocketAction{Port: intstr.FromString("db")}, c, "fd00::1"); err != nil || got != "[fd00::1]:5432" {
		t.Fatalf("tcp by name on IPv6: %q %v", got, err)
	}
	if got, err := kubecontainer.ResolveTCPSocket(&corev1.TCPSocketAction{Host: "h", Port: intstr.FromInt32(22)}, c, "10.0.0.5"); err != nil || got != "h:22" {
		t.Fatalf("tcp with host: %q %v", got, err)
	}
	if _, err := kubecontainer.ResolveTCPSocket(&corev1.TCPSocketAction{Port: intstr.FromString("web")}, c, "10.0.0.5"); err == nil {
		t.Fatal("tcp with an unknown port name resolved")
	}
	svc := "db"
	if hp, s := kubecontainer.ResolveGRPC(&corev1.GRPCAction{Port: 50051, Service: &svc}, "10.0.0.5"); hp != "10.0.0.5:50051" || s != "db" {
		t.Fatalf("grpc: %q %q", hp, s)
	}
	if _, s := kubecontainer.ResolveGRPC(&corev1.GRPCAction{Port: 50051}, "10.0.0.5"); s != "" {
		t.Fatalf("grpc without a service: %q", s)
	}
}
