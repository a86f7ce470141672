package schemas

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// intentJSON is a minimal valid apply intent for uid "u1"; rows of the table
// tests edit it with mutate.
func intentJSON(mutate func(m map[string]any)) []byte {
	m := map[string]any{
		"apiVersion": APIVersion, "kind": KindPodIntent,
		"pod": map[string]any{
			"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "u1"},
			"spec": map[string]any{"containers": []any{
				map[string]any{"name": "app", "image": "nginx"},
			}},
		},
	}
	if mutate != nil {
		mutate(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func podOf(m map[string]any) map[string]any  { return m["pod"].(map[string]any) }
func specOf(m map[string]any) map[string]any { return podOf(m)["spec"].(map[string]any) }
func container0(m map[string]any) map[string]any {
	return specOf(m)["containers"].([]any)[0].(map[string]any)
}

var target = IntentTarget{Node: "n1", UID: "u1"}

func TestDecodeIntentErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   []byte
		target IntentTarget
		field  string
		kind   ErrorKind
	}{
		{"empty body", []byte(""), target, "", ErrMalformed},
		{"trailing data", append(intentJSON(nil), []byte(" {}")...), target, "", ErrMalformed},
		{"string body", []byte(`"x"`), target, "", ErrMalformed},
		{"too large", intentJSON(nil), IntentTarget{Node: "n1", UID: "u1", MaxBodyBytes: 10}, "", ErrMalformed},
		{"bad subject node", intentJSON(nil), IntentTarget{Node: "N1", UID: "u1"}, "subject.node", ErrInvalid},
		{"bad subject uid", intentJSON(nil), IntentTarget{Node: "n1", UID: "a.b"}, "subject.uid", ErrInvalid},
		{"empty subject uid", intentJSON(nil), IntentTarget{Node: "n1"}, "subject.uid", ErrInvalid},
		{"uid mismatch", intentJSON(nil), IntentTarget{Node: "n1", UID: "u2"}, "pod.metadata.uid", ErrInvalid},
		{"field name in other case", intentJSON(func(m map[string]any) { m["Kind"] = "PodIntent" }), target, "Kind", ErrUnsupported},
		{"revision string", intentJSON(func(m map[string]any) { m["revision"] = "7" }), target, "revision", ErrInvalid},
		{"revision fraction", intentJSON(func(m map[string]any) { m["revision"] = 1.5 }), target, "revision", ErrInvalid},
		{"revision negative", intentJSON(func(m map[string]any) { m["revision"] = -3 }), target, "revision", ErrInvalid},
		{"pod null", intentJSON(func(m map[string]any) { m["pod"] = nil }), target, "pod", ErrInvalid},
		{"pod string", intentJSON(func(m map[string]any) { m["pod"] = "web" }), target, "pod", ErrInvalid},
		{"metadata null", intentJSON(func(m map[string]any) { podOf(m)["metadata"] = nil }), target, "pod.metadata", ErrInvalid},
		{"unknown pod field", intentJSON(func(m map[string]any) { podOf(m)["extra"] = 1 }), target, "pod.extra", ErrUnsupported},
		{"pod apiVersion", intentJSON(func(m map[string]any) { podOf(m)["apiVersion"] = "v2" }), target, "pod.apiVersion", ErrInvalid},
		{"name too long", intentJSON(func(m map[string]any) {
			podOf(m)["metadata"].(map[string]any)["name"] = strings.Repeat("a", 254)
		}), target, "pod.metadata.name", ErrInvalid},
		{"image white space", intentJSON(func(m map[string]any) { container0(m)["image"] = " nginx" }), target, "pod.spec.containers[0].image", ErrInvalid},
		{"image reference unparsable", intentJSON(func(m map[string]any) { container0(m)["image"] = "Busy Box:?" }), target, "pod.spec.containers[0].image", ErrInvalid},
		{"image repository upper case", intentJSON(func(m map[string]any) { container0(m)["image"] = "BusyBox:1.36" }), target, "pod.spec.containers[0].image", ErrInvalid},
		{"image digest short", intentJSON(func(m map[string]any) { container0(m)["image"] = "nginx@sha256:0123" }), target, "pod.spec.containers[0].image", ErrInvalid},
		{"labels not strings", intentJSON(func(m map[string]any) {
			podOf(m)["metadata"].(map[string]any)["labels"] = map[string]any{"app": 1}
		}), target, "pod.metadata.labels[app]", ErrInvalid},
		{"label key", intentJSON(func(m map[string]any) {
			podOf(m)["metadata"].(map[string]any)["labels"] = map[string]any{"example.com/-bad": "x"}
		}), target, "pod.metadata.labels[example.com/-bad]", ErrInvalid},
		{"annotation key", intentJSON(func(m map[string]any) {
			podOf(m)["metadata"].(map[string]any)["annotations"] = map[string]any{"a b": "x"}
		}), target, "pod.metadata.annotations[a b]", ErrInvalid},
		{"creationTimestamp garbage", intentJSON(func(m map[string]any) {
			podOf(m)["metadata"].(map[string]any)["creationTimestamp"] = "yesterday"
		}), target, "pod.metadata.creationTimestamp", ErrInvalid},
		{"int32 overflow", intentJSON(func(m map[string]any) {
			container0(m)["ports"] = []any{map[string]any{"containerPort": 1 << 40}}
		}), target, "pod.spec.containers[0].ports[0].containerPort", ErrInvalid},
		{"init container probe", intentJSON(func(m map[string]any) {
			specOf(m)["initContainers"] = []any{map[string]any{"name": "init", "image": "busybox",
				"livenessProbe": map[string]any{"exec": map[string]any{"command": []any{"true"}}}}}
		}), target, "pod.spec.initContainers[0].livenessProbe", ErrInvalid},
		{"init container restartPolicy Sometimes", intentJSON(func(m map[string]any) {
			specOf(m)["initContainers"] = []any{map[string]any{"name": "init", "image": "busybox", "restartPolicy": "Sometimes"}}
		}), target, "pod.spec.initContainers[0].restartPolicy", ErrInvalid},
		{"exec without command", intentJSON(func(m map[string]any) {
			container0(m)["livenessProbe"] = map[string]any{"exec": map[string]any{}}
		}), target, "pod.spec.containers[0].livenessProbe.exec.command", ErrInvalid},
		{"lifecycle tcpSocket", intentJSON(func(m map[string]any) {
			container0(m)["lifecycle"] = map[string]any{"preStop": map[string]any{"tcpSocket": map[string]any{"port": 80}}}
		}), target, "pod.spec.containers[0].lifecycle.preStop.tcpSocket", ErrUnsupported},
		{"stopSignal unknown", intentJSON(func(m map[string]any) {
			container0(m)["lifecycle"] = map[string]any{"stopSignal": "SIGRTMIN+16"}
		}), target, "pod.spec.containers[0].lifecycle.stopSignal", ErrInvalid},
		{"hostPath relative", intentJSON(func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "h", "hostPath": map[string]any{"path": "var/log"}}}
		}), target, "pod.spec.volumes[0].hostPath.path", ErrInvalid},
		{"subPath escapes", intentJSON(func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "d"}}
			container0(m)["volumeMounts"] = []any{map[string]any{"name": "d", "mountPath": "/d", "subPath": "../etc"}}
		}), target, "pod.spec.containers[0].volumeMounts[0].subPath", ErrInvalid},
		{"duplicate port name", intentJSON(func(m map[string]any) {
			container0(m)["ports"] = []any{map[string]any{"name": "http", "containerPort": 80}, map[string]any{"name": "http", "containerPort": 81}}
		}), target, "pod.spec.containers[0].ports[1].name", ErrInvalid},
		{"dnsPolicy None without dnsConfig", intentJSON(func(m map[string]any) { specOf(m)["dnsPolicy"] = "None" }), target, "pod.spec.dnsConfig", ErrInvalid},
		{"dnsPolicy None without nameservers", intentJSON(func(m map[string]any) {
			specOf(m)["dnsPolicy"] = "None"
			specOf(m)["dnsConfig"] = map[string]any{"searches": []any{"example.com"}}
		}), target, "pod.spec.dnsConfig.nameservers", ErrInvalid},
		{"four nameservers", intentJSON(func(m map[string]any) {
			specOf(m)["dnsConfig"] = map[string]any{"nameservers": []any{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}}
		}), target, "pod.spec.dnsConfig.nameservers", ErrInvalid},
		{"nameserver no IP", intentJSON(func(m map[string]any) {
			specOf(m)["dnsConfig"] = map[string]any{"nameservers": []any{"dns.example.com"}}
		}), target, "pod.spec.dnsConfig.nameservers[0]", ErrInvalid},
		{"search no domain", intentJSON(func(m map[string]any) {
			specOf(m)["dnsConfig"] = map[string]any{"searches": []any{"a..b"}}
		}), target, "pod.spec.dnsConfig.searches[0]", ErrInvalid},
		{"option without name", intentJSON(func(m map[string]any) {
			specOf(m)["dnsConfig"] = map[string]any{"options": []any{map[string]any{"value": "5"}}}
		}), target, "pod.spec.dnsConfig.options[0].name", ErrInvalid},
		{"host alias hostname", intentJSON(func(m map[string]any) {
			specOf(m)["hostAliases"] = []any{map[string]any{"ip": "10.0.0.1", "hostnames": []any{"Not_A_Name"}}}
		}), target, "pod.spec.hostAliases[0].hostnames[0]", ErrInvalid},
		{"windows", intentJSON(func(m map[string]any) { specOf(m)["os"] = map[string]any{"name": "windows"} }), target, "pod.spec.os.name", ErrUnsupported},
		{"resource claims", intentJSON(func(m map[string]any) {
			specOf(m)["resourceClaims"] = []any{map[string]any{"name": "gpu"}}
		}), target, "pod.spec.resourceClaims", ErrUnsupported},
		{"memory emptyDir on a node that cannot mount tmpfs", intentJSON(func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "ram", "emptyDir": map[string]any{"medium": "Memory"}}}
		}), IntentTarget{Node: "n1", UID: "u1", NoMemoryEmptyDir: true}, "pod.spec.volumes[0].emptyDir.medium", ErrUnsupported},
		{"projected volume on a node that cannot mount tmpfs", intentJSON(func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "info", "projected": map[string]any{"sources": []any{
				map[string]any{"configMap": map[string]any{"name": "app"}}}}}}
		}), IntentTarget{Node: "n1", UID: "u1", NoMemoryEmptyDir: true}, "pod.spec.volumes[0].projected", ErrUnsupported},
		{"downwardAPI volume on a node that cannot mount tmpfs", intentJSON(func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "info", "downwardAPI": map[string]any{"items": []any{
				map[string]any{"path": "name", "fieldRef": map[string]any{"fieldPath": "metadata.name"}}}}}}
		}), IntentTarget{Node: "n1", UID: "u1", NoMemoryEmptyDir: true}, "pod.spec.volumes[0].downwardAPI", ErrUnsupported},
		{"hostUsers false on a runtime without user namespaces", intentJSON(func(m map[string]any) {
			specOf(m)["hostUsers"] = false
		}), IntentTarget{Node: "n1", UID: "u1", NoUserNamespaces: true}, "pod.spec.hostUsers", ErrUnsupported},
		{"hostUsers false with the host's network", intentJSON(func(m map[string]any) {
			specOf(m)["hostUsers"], specOf(m)["hostNetwork"] = false, true
		}), target, "pod.spec.hostNetwork", ErrInvalid},
		{"hostUsers false with the host's IPC", intentJSON(func(m map[string]any) {
			specOf(m)["hostUsers"], specOf(m)["hostIPC"] = false, true
		}), target, "pod.spec.hostIPC", ErrInvalid},
		{"procMount Unmasked in the host's user namespace", intentJSON(func(m map[string]any) {
			specOf(m)["hostUsers"] = true
			container0(m)["securityContext"] = map[string]any{"procMount": "Unmasked"}
		}), target, "pod.spec.containers[0].securityContext.procMount", ErrInvalid},
		{"procMount unknown", intentJSON(func(m map[string]any) {
			specOf(m)["hostUsers"] = false
			container0(m)["securityContext"] = map[string]any{"procMount": "Partial"}
		}), target, "pod.spec.containers[0].securityContext.procMount", ErrInvalid},
		{"resourceFieldRef cpu divisor", intentJSON(func(m map[string]any) {
			container0(m)["env"] = []any{map[string]any{"name": "C", "valueFrom": map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.cpu", "divisor": "1Mi"}}}}
		}), target, "pod.spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor", ErrInvalid},
		{"resourceFieldRef unknown container", intentJSON(func(m map[string]any) {
			container0(m)["env"] = []any{map[string]any{"name": "C", "valueFrom": map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.memory", "containerName": "nope"}}}}
		}), target, "pod.spec.containers[0].env[0].valueFrom.resourceFieldRef.containerName", ErrInvalid},
		{"seccomp Localhost without a profile", intentJSON(func(m map[string]any) {
			container0(m)["securityContext"] = map[string]any{"seccompProfile": map[string]any{"type": "Localhost"}}
		}), target, "pod.spec.containers[0].securityContext.seccompProfile.localhostProfile", ErrInvalid},
		{"hostnameOverride with hostNetwork", intentJSON(func(m map[string]any) {
			specOf(m)["hostNetwork"], specOf(m)["hostnameOverride"] = true, "web-0"
		}), target, "pod.spec.hostnameOverride", ErrInvalid},
		{"httpGet over HTTP/2", intentJSON(func(m map[string]any) {
			container0(m)["readinessProbe"] = map[string]any{"httpGet": map[string]any{"port": 80, "protocol": "HTTP2"}}
		}), target, "pod.spec.containers[0].readinessProbe.httpGet.protocol", ErrUnsupported},
		{"gRPC probe over TLS", intentJSON(func(m map[string]any) {
			container0(m)["livenessProbe"] = map[string]any{"grpc": map[string]any{"port": 9090, "mode": "TLS"}}
		}), target, "pod.spec.containers[0].livenessProbe.grpc.mode", ErrUnsupported},
		{"hugepages page size", intentJSON(func(m map[string]any) {
			container0(m)["resources"] = map[string]any{"limits": map[string]any{"hugepages-big": "2Mi"}}
		}), target, "pod.spec.containers[0].resources.limits[hugepages-big]", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeIntent(tt.body, tt.target)
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T %v is not a *ValidationError", err, err)
			}
			if ve.Field != tt.field || ve.Kind != tt.kind {
				t.Errorf("got %q (%s), want %q (%s); all: %v", ve.Field, ve.Kind, tt.field, tt.kind, err)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("errors.Is(err, %s) false", tt.kind)
			}
			var list ValidationErrors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Errorf("not a non-empty ValidationErrors: %T", err)
			}
		})
	}
}

func TestDecodeIntentCollectsEveryProblem(t *testing.T) {
	body := intentJSON(func(m map[string]any) {
		c := container0(m)
		c["name"] = "Bad"
		delete(c, "image")
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "persistentVolumeClaim": map[string]any{"claimName": "c"}}}
	})
	_, err := DecodeIntent(body, target)
	var list ValidationErrors
	if !errors.As(err, &list) {
		t.Fatalf("got %v", err)
	}
	fields := map[string]bool{}
	for _, e := range list {
		fields[e.Field] = true
	}
	for _, f := range []string{"pod.spec.containers[0].name", "pod.spec.containers[0].image", "pod.spec.volumes[0].persistentVolumeClaim"} {
		if !fields[f] {
			t.Errorf("%s not reported in %v", f, err)
		}
	}
	if !list.Has(ErrInvalid) || !list.Has(ErrUnsupported) || list.Has(ErrMalformed) {
		t.Errorf("kinds wrong in %v", err)
	}
	if !strings.Contains(err.Error(), "pod.spec.volumes[0].persistentVolumeClaim: unsupported: ") {
		t.Errorf("message %q", err.Error())
	}
}

// A subPath's error names what is wrong with it: absolute, or a '..'.
func TestDecodeIntentSubPathMessages(t *testing.T) {
	for sub, want := range map[string]string{
		"/etc":    "subPath: invalid: must be a relative path, not an absolute one",
		"a/../..": "subPath: invalid: must not contain '..'",
	} {
		body := intentJSON(func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "d"}}
			container0(m)["volumeMounts"] = []any{map[string]any{"name": "d", "mountPath": "/d", "subPath": sub}}
		})
		if _, err := DecodeIntent(body, target); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("subPath %q: %v, want %q", sub, err, want)
		}
	}
}

func TestDecodeIntentDefaults(t *testing.T) {
	body := intentJSON(func(m map[string]any) {
		c := container0(m)
		c["ports"] = []any{map[string]any{"containerPort": 80}}
		c["livenessProbe"] = map[string]any{"httpGet": map[string]any{"port": 80}}
		c["readinessProbe"] = map[string]any{"grpc": map[string]any{"port": 9090}}
		c["resources"] = map[string]any{"limits": map[string]any{"cpu": "1", "memory": "100.0001"}}
		c["env"] = []any{map[string]any{"name": "N", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "spec.nodeName"}}}}
		c["lifecycle"] = map[string]any{"preStop": map[string]any{"httpGet": map[string]any{"port": 80}}}
		specOf(m)["volumes"] = []any{map[string]any{"name": "scratch"}, map[string]any{"name": "h", "hostPath": map[string]any{"path": "/h"}}}
		podOf(m)["status"] = map[string]any{"phase": "Running", "anything": []any{1, "x"}}
	})
	in, err := DecodeIntent(body, target)
	if err != nil {
		t.Fatal(err)
	}
	if in.Op != OpApply {
		t.Errorf("op %q", in.Op)
	}
	p := in.Pod
	s := p.Spec
	c := s.Containers[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"apiVersion", p.APIVersion, "v1"},
		{"kind", p.Kind, "Pod"},
		{"status dropped", p.Status.Phase, corev1.PodPhase("")},
		{"restartPolicy", s.RestartPolicy, corev1.RestartPolicyAlways},
		{"terminationGracePeriodSeconds", *s.TerminationGracePeriodSeconds, int64(30)},
		{"dnsPolicy", s.DNSPolicy, corev1.DNSClusterFirst},
		{"nodeName", s.NodeName, "n1"},
		{"enableServiceLinks", *s.EnableServiceLinks, true},
		{"securityContext", s.SecurityContext != nil, true},
		{"volume without source", s.Volumes[0].EmptyDir != nil, true},
		{"hostPath type", *s.Volumes[1].HostPath.Type, corev1.HostPathUnset},
		{"imagePullPolicy", c.ImagePullPolicy, corev1.PullAlways},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"port protocol", c.Ports[0].Protocol, corev1.ProtocolTCP},
		{"probe timeoutSeconds", c.LivenessProbe.TimeoutSeconds, int32(1)},
		{"probe periodSeconds", c.LivenessProbe.PeriodSeconds, int32(10)},
		{"probe successThreshold", c.LivenessProbe.SuccessThreshold, int32(1)},
		{"probe failureThreshold", c.LivenessProbe.FailureThreshold, int32(3)},
		{"httpGet scheme", c.LivenessProbe.HTTPGet.Scheme, corev1.URISchemeHTTP},
		{"httpGet path", c.LivenessProbe.HTTPGet.Path, "/"},
		{"grpc service", *c.ReadinessProbe.GRPC.Service, ""},
		{"preStop httpGet scheme", c.Lifecycle.PreStop.HTTPGet.Scheme, corev1.URISchemeHTTP},
		{"requests from limits", c.Resources.Requests.Cpu().String(), "1"},
		{"quantities rounded up to milli", c.Resources.Limits.Memory().String(), "100001m"},
		{"fieldRef apiVersion", c.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}

	// Defaulting is idempotent: the decoded pod decodes to itself.
	again, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	in2, err := DecodeIntent(again, target)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(in2)
	if string(b1) != string(again) {
		t.Errorf("defaults not idempotent:\n%s\n%s", again, b1)
	}
}

func TestDecodeIntentHostNetworkPorts(t *testing.T) {
	body := intentJSON(func(m map[string]any) {
		specOf(m)["hostNetwork"] = true
		container0(m)["ports"] = []any{map[string]any{"containerPort": 8080}}
	})
	in, err := DecodeIntent(body, target)
	if err != nil {
		t.Fatal(err)
	}
	if hp := in.Pod.Spec.Containers[0].Ports[0].HostPort; hp != 8080 {
		t.Errorf("hostPort %d, want 8080", hp)
	}
}

func TestImagePullPolicyDefault(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"registry:5000/nginx", corev1.PullAlways},
		{"registry:5000/nginx:latest", corev1.PullAlways},
		{"registry:5000/team/nginx:v2", corev1.PullIfNotPresent},
		{"nginx@sha256:0123456789abcdef", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789abcdef", corev1.PullAlways},
		{"nginx:1.27@sha256:0123456789abcdef", corev1.PullIfNotPresent},
		{"localhost:5000/nginx@sha256:0123456789abcdef", corev1.PullIfNotPresent},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			c := corev1.Container{Image: tt.image}
			setContainerDefaults(&c, false)
			if c.ImagePullPolicy != tt.want {
				t.Errorf("got %s, want %s", c.ImagePullPolicy, tt.want)
			}
		})
	}
}

func TestDecodeIntentDelete(t *testing.T) {
	body := []byte(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","op":"delete","revision":3,
		"pod":{"metadata":{"name":"web","namespace":"default","uid":"u1"},
		       "spec":{"terminationGracePeriodSeconds":12,"containers":[{"name":"BAD","image":""}],"ephemeralContainers":[{"name":"x"}]}}}`)
	in, err := DecodeIntent(body, target)
	if err != nil {
		t.Fatal(err)
	}
	if in.Op != OpDelete || in.Revision != 3 {
		t.Errorf("op %q revision %d", in.Op, in.Revision)
	}
	if g := in.GracePeriod(); g != 12 {
		t.Errorf("grace period %d, want the pod's 12", g)
	}
	// A spec that does not even decode is dropped, not an error.
	body = []byte(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","op":"delete",
		"pod":{"metadata":{"name":"web","namespace":"default","uid":"u1"},"spec":"nonsense"}}`)
	in, err = DecodeIntent(body, target)
	if err != nil {
		t.Fatal(err)
	}
	if g := in.GracePeriod(); g != DefaultGracePeriodSeconds {
		t.Errorf("grace period %d", g)
	}
}

func TestGracePeriod(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	withPod := func(g *int64) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: g}}
	}
	tests := []struct {
		name   string
		intent PodIntent
		want   int64
	}{
		{"nothing", PodIntent{}, 30},
		{"intent", PodIntent{GracePeriodSeconds: i64(5), Pod: withPod(i64(9))}, 5},
		{"intent zero", PodIntent{GracePeriodSeconds: i64(0), Pod: withPod(i64(9))}, 0},
		{"pod", PodIntent{Pod: withPod(i64(9))}, 9},
		{"negative pod ignored", PodIntent{Pod: withPod(i64(-1))}, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.intent.GracePeriod(); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// A privileged container is valid; whether the node runs it is admission's
// (its Pod Security level). Privileged without privilege escalation is not.
func TestDecodeIntentPrivileged(t *testing.T) {
	privileged := func(sc map[string]any) []byte {
		return intentJSON(func(m map[string]any) { container0(m)["securityContext"] = sc })
	}
	if _, err := DecodeIntent(privileged(map[string]any{"privileged": true}), target); err != nil {
		t.Errorf("privileged refused: %v", err)
	}
	_, err := DecodeIntent(privileged(map[string]any{"privileged": true, "allowPrivilegeEscalation": false}), target)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "allowPrivilegeEscalation") {
		t.Errorf("privileged without privilege escalation: %v, want invalid allowPrivilegeEscalation", err)
	}
}

func TestDecodeIntentSizeLimit(t *testing.T) {
	body := intentJSON(nil)
	exact := target
	exact.MaxBodyBytes = len(body)
	if _, err := DecodeIntent(body, exact); err != nil {
		t.Errorf("body of exactly the limit refused: %v", err)
	}
	big := intentJSON(func(m map[string]any) {
		podOf(m)["metadata"].(map[string]any)["annotations"] = map[string]any{"a": strings.Repeat("x", DefaultMaxIntentBytes)}
	})
	if _, err := DecodeIntent(big, target); !errors.Is(err, ErrMalformed) {
		t.Errorf("body over the default limit: %v", err)
	}
}

func TestPeekEnvelope(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Envelope
	}{
		{"privileged pod", `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":3,"pod":{"metadata":{"name":"web","namespace":"default","uid":"abc-123"},"spec":{"containers":[{"name":"c","image":"i","securityContext":{"privileged":true}}]}}}`,
			Envelope{Op: OpApply, Revision: 3, Namespace: "default", Name: "web", UID: "abc-123"}},
		{"delete", `{"op":"delete","pod":{"metadata":{"name":"web","namespace":"default","uid":"abc"}}}`,
			Envelope{Op: OpDelete, Namespace: "default", Name: "web", UID: "abc"}},
		{"bad fields hide nothing else", `{"kind":7,"op":"explode","revision":"x","pod":{"spec":"x","metadata":{"uid":"abc","name":"Web!","namespace":"ok"}}}`,
			Envelope{Op: OpApply, Namespace: "ok", UID: "abc"}},
		{"revision not positive", `{"revision":0,"pod":{"metadata":{"uid":"abc"}}}`, Envelope{Op: OpApply, UID: "abc"}},
		{"uid not a token", `{"revision":2,"pod":{"metadata":{"uid":"a.b"}}}`, Envelope{Op: OpApply, Revision: 2}},
		{"uid not a string", `{"pod":{"metadata":{"uid":42}}}`, Envelope{Op: OpApply}},
		{"no metadata", `{"pod":{"metadata":{}}}`, Envelope{Op: OpApply}},
		{"pod not an object", `{"revision":5,"pod":"x"}`, Envelope{Op: OpApply, Revision: 5}},
		{"not json", `not json`, Envelope{Op: OpApply}},
		{"empty", ``, Envelope{Op: OpApply}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PeekEnvelope([]byte(tt.body)); got != tt.want {
				t.Errorf("PeekEnvelope(%s) = %+v; want %+v", tt.body, got, tt.want)
			}
		})
	}
}

func TestValidationErrorsMessage(t *testing.T) {
	var l ValidationErrors
	for range maxReported + 3 {
		l = append(l, &ValidationError{Kind: ErrInvalid, Field: "f", Reason: "r"})
	}
	msg := l.Error()
	if !strings.HasSuffix(msg, "; and 3 more") || strings.Count(msg, "f: invalid: r") != maxReported {
		t.Errorf("message %q", msg)
	}
	whole := &ValidationError{Kind: ErrMalformed, Reason: "not JSON"}
	if whole.Error() != "malformed: not JSON" {
		t.Errorf("message %q", whole.Error())
	}
}

// The other schemas describe what jetlet writes: a message marshalled from the
// Go types must validate, and a broken one must not.
func TestOutputSchemas(t *testing.T) {
	now := time.Date(2025, 3, 1, 10, 0, 0, 123, time.UTC)
	exit := int32(3)
	status := &PodStatus{
		UID: "u1", Namespace: "default", Name: "web", Node: "n1", Revision: 7, IntentSeq: 1234,
		Phase:      PhaseRunning,
		Sandbox:    &SandboxStatus{ID: "s1", State: SandboxReady, IPs: []string{"10.0.0.2"}},
		Containers: []ContainerStatus{{Name: "app", ContainerID: "c1", Image: "nginx", State: ContainerRunning, RestartCount: 1, StartedAt: now.Format(time.RFC3339Nano), Ready: true}},
		ObservedAt: now,
	}
	tests := []struct {
		schema string
		msg    any
		break_ func(m map[string]any)
	}{
		{SchemaSyncResult, SyncResult{
			APIVersion: APIVersion, Kind: KindSyncResult, Node: "n1", UID: "u1", Namespace: "default", Name: "web",
			IntentSeq: 1234, Revision: 7, Op: OpApply, Outcome: OutcomeSynced,
			Actions: []ActionResult{{Action: ActionCreatePodSandbox, Target: "u1"}},
			Status:  status, ReceivedAt: now, FinishedAt: now,
		}, func(m map[string]any) { m["outcome"] = "Done" }},
		{SchemaSyncResult, SyncResult{
			APIVersion: APIVersion, Kind: KindSyncResult, Node: "n1", UID: "u1", Op: OpDelete, Outcome: OutcomeRejected,
			Error: "pod.spec: invalid: required", ReceivedAt: now, FinishedAt: now,
		}, func(m map[string]any) { delete(m, "intentSeq") }},
		{SchemaLifecycleEvent, LifecycleEvent{
			APIVersion: APIVersion, Kind: KindLifecycleEvent, ID: "e1", Type: EventContainerDied, Node: "n1", UID: "u1",
			Namespace: "default", Pod: "web", Container: "app", Attempt: 2, ExitCode: &exit, Reason: ReasonError, Time: now,
		}, func(m map[string]any) { m["type"] = "ContainerExploded" }},
		{SchemaPodStatus, status, func(m map[string]any) { m["phase"] = "Sleeping" }},
		{SchemaPodStatus, &PodStatus{UID: "u1", Node: "n1", Phase: PhaseTerminated, ObservedAt: now},
			func(m map[string]any) { m["uid"] = "a.b" }},
		{SchemaNodeRecord, NodeRecord{
			APIVersion: APIVersion, Kind: KindNode, Node: "n1", JetletVersion: "dev", RuntimeName: "jetlet-proc",
			Pods:      PodCounts{Total: 1, ByPhase: map[PodPhase]int{PhaseRunning: 1}},
			StartedAt: now, HeartbeatAt: now, Extra: json.RawMessage(`{"cpus":2}`),
		}, func(m map[string]any) { m["pods"].(map[string]any)["byPhase"] = map[string]any{"Dancing": 1} }},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			s, err := compileSchema(tt.schema)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemaAccepts(t, s, b); err != nil {
				t.Errorf("schema refuses %s: %v", b, err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			tt.break_(m)
			b, _ = json.Marshal(m)
			if err := schemaAccepts(t, s, b); err == nil {
				t.Errorf("schema accepts a broken message %s", b)
			}
		})
	}
}

func TestJSONSchemaLookup(t *testing.T) {
	for _, name := range SchemaNames {
		if len(JSONSchema(name)) == 0 {
			t.Errorf("no schema %s", name)
		}
		if _, err := compileSchema(name); err != nil {
			t.Errorf("%s does not compile: %v", name, err)
		}
	}
	if JSONSchema("Nope") != nil {
		t.Error("unknown name returned a schema")
	}
}
