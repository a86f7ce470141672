package reconcile

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

func envString(envs []*runtimeapi.KeyValue) string {
	var parts []string
	for _, e := range envs {
		parts = append(parts, e.Key+"="+string(e.Value))
	}
	return strings.Join(parts, " ")
}

func cmRef(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }

// env from ConfigMaps and Secrets as kubelet builds it: envFrom first (keys
// sorted, prefixed, invalid names skipped with an event), then env in
// order, overriding; optional references to what is missing set nothing.
func TestEnvFromConfigMapsAndSecrets(t *testing.T) {
	ct := newConfigTest(t)
	ct.objs.putConfigMap("app", map[string]string{"LEVEL": "debug", "PORT": "80", "BAD=KEY": "x", "café": "x"})
	ct.objs.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"PASSWORD": "hunter2", "USER": "admin"})
	optional := true
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("app")}},
			{Prefix: "DB_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("db")}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("absent"), Optional: &optional}},
		},
		Env: []corev1.EnvVar{
			{Name: "PORT", Value: "8080"},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("app"), Key: "LEVEL"}}},
			{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("db"), Key: "PASSWORD"}}},
			{Name: "NOKEY", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("app"), Key: "nope", Optional: &optional}}},
			{Name: "NOOBJ", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("absent"), Key: "k", Optional: &optional}}},
			{Name: "URL", Value: "http://$(DB_USER)@host:$(PORT)"},
		}})
	if r := syncOnce(t, ct.m, pod); r.Error() != nil {
		t.Fatal(r.Error())
	}
	want := "LEVEL=debug PORT=8080 DB_PASSWORD=hunter2 DB_USER=admin MODE=debug PW=hunter2 URL=http://admin@host:8080"
	if got := envString(ct.rt.config(t, "app").Envs); got != want {
		t.Errorf("env\n got %s\nwant %s", got, want)
	}
	evs := ct.events.of(schemas.EventInvalidEnvironmentVariableNames)
	if len(evs) != 1 || evs[0].Container != "app" ||
		evs[0].Message != "Keys [BAD=KEY, café] from the EnvFrom configmap ns/app were skipped since they are considered invalid environment variable names." {
		t.Errorf("InvalidEnvironmentVariableNames events %+v", evs)
	}
}

// A missing object or key, not optional: the container is not created and
// waits in CreateContainerConfigError, its message naming the object; the
// sync after the object is put creates it.
func TestEnvWaitsForItsObjects(t *testing.T) {
	tests := []struct {
		name    string
		env     corev1.EnvVar
		envFrom []corev1.EnvFromSource
		message string
		put     func(*fakeObjects)
	}{
		{name: "configMapKeyRef, no ConfigMap",
			env:     corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("app"), Key: "k"}}},
			message: "configmap ns/app not found",
			put:     func(o *fakeObjects) { o.putConfigMap("app", map[string]string{"k": "v"}) }},
		{name: "configMapKeyRef, no key",
			env:     corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("other"), Key: "k"}}},
			message: "couldn't find key k in ConfigMap ns/other",
			put:     func(o *fakeObjects) { o.putConfigMap("other", map[string]string{"k": "v"}) }},
		{name: "secretKeyRef, no Secret",
			env:     corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("db"), Key: "k"}}},
			message: "secret ns/db not found",
			put:     func(o *fakeObjects) { o.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"k": "v"}) }},
		{name: "secretKeyRef, no key",
			env:     corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("other"), Key: "k"}}},
			message: "couldn't find key k in Secret ns/other",
			put:     func(o *fakeObjects) { o.putSecret("other", corev1.SecretTypeOpaque, map[string]string{"k": "v"}) }},
		{name: "envFrom secretRef, no Secret",
			envFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("db")}}},
			message: "secret ns/db not found",
			put:     func(o *fakeObjects) { o.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"A": "v"}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := newConfigTest(t)
			ct.objs.putConfigMap("other", nil)
			ct.objs.putSecret("other", corev1.SecretTypeOpaque, nil)
			c := corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}, EnvFrom: tt.envFrom}
			if tt.env.Name != "" {
				c.Env = []corev1.EnvVar{tt.env}
			}
			pod := testPod(c)
			for range 2 {
				r := syncOnce(t, ct.m, pod)
				if sr := startResult(r); sr.Error != kubecontainer.ErrCreateContainerConfig.Error() || sr.Message != tt.message {
					t.Fatalf("start: %q %q, want %s %q", sr.Error, sr.Message, kubecontainer.ErrCreateContainerConfig, tt.message)
				}
			}
			if n := ct.events.count(schemas.EventContainerCreated); n != 0 {
				t.Fatalf("%d containers created", n)
			}
			st := ct.status(t, pod).Containers[0]
			if st.State != schemas.ContainerWaiting || st.Reason != "CreateContainerConfigError" || st.Message != tt.message {
				t.Errorf("status %s %s %q, want Waiting CreateContainerConfigError %q", st.State, st.Reason, st.Message, tt.message)
			}
			tt.put(ct.objs)
			if r := syncOnce(t, ct.m, pod); r.Error() != nil {
				t.Fatalf("sync once the object is there: %v", r.Error())
			}
			if st := ct.status(t, pod).Containers[0]; st.State != schemas.ContainerRunning {
				t.Errorf("status %s once the object is there", st.State)
			}
		})
	}
}

// dockerConfigJSON is a config.json with one registry's credentials.
func dockerConfigJSON(registry, user, password string) string {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, registry, auth)
}

// imagePullSecrets come first, in the pod's order, then the node's
// credentials, as kubelet's union keyring; a missing secret, one of another
// type or for another registry offers nothing.
func TestImagePullSecretsBeforeTheNodesCredentials(t *testing.T) {
	const image = "registry.example.com/team/app:1"
	objs := newFakeObjects()
	objs.putSecret("json", corev1.SecretTypeDockerConfigJson, map[string]string{corev1.DockerConfigJsonKey: dockerConfigJSON("registry.example.com", "json-user", "pw-json")})
	objs.putSecret("cfg", corev1.SecretTypeDockercfg, map[string]string{corev1.DockerConfigKey: `{"registry.example.com/team": {"username": "cfg-user", "password": "pw-cfg"}}`})
	objs.putSecret("elsewhere", corev1.SecretTypeDockerConfigJson, map[string]string{corev1.DockerConfigJsonKey: dockerConfigJSON("other.example.com", "other-user", "pw-other")})
	objs.putSecret("opaque", corev1.SecretTypeOpaque, map[string]string{corev1.DockerConfigJsonKey: dockerConfigJSON("registry.example.com", "opaque-user", "pw-opaque")})
	node := staticCredentials{image: {{Username: "node-user", Password: "pw-node"}}}
	rt := &authRegistry{Runtime: fakecri.New(), password: "pw-node"}
	var logs bytes.Buffer
	m, err := New(rt, &eventLog{}, Config{NodeName: "n1", DataDir: t.TempDir(), Objects: objs, Credentials: node,
		Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.Container{Name: "app", Image: image, Command: []string{"x"}})
	for _, n := range []string{"missing", "opaque", "cfg", "elsewhere", "json"} {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
	}
	if r := syncOnce(t, m, pod); r.Error() != nil {
		t.Fatal(r.Error())
	}
	if got := strings.Join(rt.offered, ","); got != "pw-cfg,pw-json,pw-node" {
		t.Errorf("credentials offered %q, want the pod's secrets in its order, then the node's", got)
	}
	if !strings.Contains(logs.String(), `"secret":"missing"`) {
		t.Errorf("no warning for the missing pull secret: %s", logs.String())
	}
	if strings.Contains(logs.String(), "pw-") {
		t.Errorf("the log shows a password: %s", logs.String())
	}
}

// No value of a Secret appears in an event, a result, a status, an error or
// a log line, whatever the sync ends with: missing keys, a pull refused
// with a pull secret, invalid env names, a volume update.
func TestSecretValuesNeverLeak(t *testing.T) {
	const marker = "M4RK3R-s3cr3t"
	objs, events := newFakeObjects(), &eventLog{}
	var logs bytes.Buffer
	rt := &authRegistry{Runtime: fakecri.New(), password: "not-the-marker"}
	m, err := New(rt, events, Config{NodeName: "n1", DataDir: t.TempDir(), Objects: objs,
		Logger: zerolog.New(&logs).Level(zerolog.TraceLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.tearDownVolumes("uid1") })
	objs.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"password": marker, "BAD=KEY": marker})
	objs.putSecret("pull", corev1.SecretTypeDockerConfigJson, map[string]string{corev1.DockerConfigJsonKey: dockerConfigJSON("registry.example.com", "u", marker)})
	// A pull secret that does not parse: the error names no value.
	objs.putSecret("broken", corev1.SecretTypeDockerConfigJson, map[string]string{corev1.DockerConfigJsonKey: `{"auths": {"registry.example.com": {"auth": "` + marker + `"}}}`})

	var results, statuses []string
	sync := func(pod *corev1.Pod) {
		r := m.SyncPod(context.Background(), pod, mustStatus(t, m, pod))
		wire, _ := json.Marshal(r.ActionResults())
		results = append(results, string(wire))
		if err := r.Error(); err != nil {
			results = append(results, err.Error())
		}
		st, _ := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
		status, _ := json.Marshal(m.ToAPIStatus(pod, st))
		statuses = append(statuses, string(status))
	}
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("db")}}},
		Env: []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: cmRef("db"), Key: "missing"}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "sec", MountPath: "/s"}}},
		corev1.Container{Name: "private", Image: "registry.example.com/app:1", Command: []string{"x"}})
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}, {Name: "broken"}}
	pod.Spec.Volumes = []corev1.Volume{volumeOf("sec", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db",
		Items: []corev1.KeyToPath{{Key: "password", Path: "pw"}, {Key: "absent", Path: "absent"}}}})}
	sync(pod) // FailedMount: a missing key
	pod.Spec.Volumes[0].Secret.Items = pod.Spec.Volumes[0].Secret.Items[:1]
	sync(pod) // CreateContainerConfigError (missing env key), a refused pull
	pod.Spec.Containers[0].Env = nil
	sync(pod) // started, invalid env names skipped
	objs.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"password": marker + "2"})
	sync(pod) // the volume updated

	if !strings.Contains(strings.Join(results, "\n"), "CreateContainerConfigError") || events.count(schemas.EventFailedMount) == 0 ||
		events.count(schemas.EventInvalidEnvironmentVariableNames) == 0 || events.count(schemas.EventImagePullFailed) == 0 {
		t.Fatalf("the syncs did not go through every failure: results %v, events %v", results, events.events)
	}
	evs, _ := json.Marshal(events.events)
	for what, text := range map[string]string{"results and errors": strings.Join(results, "\n"), "statuses": strings.Join(statuses, "\n"),
		"events": string(evs), "log": logs.String()} {
		if strings.Contains(text, marker) {
			t.Errorf("the %s show the Secret's value", what)
		}
	}
}

func mustStatus(t *testing.T, m *Kuberuntime, pod *corev1.Pod) *kubecontainer.PodStatus {
	t.Helper()
	st, err := m.GetPodStatus(context.Background(), string(pod.UID), pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
