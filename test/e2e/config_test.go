package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/testimages"
)

// secretMarker is the Secret's value: it must reach the pod and nothing
// else (the store, jetlet's log, results, events, statuses).
const secretMarker = "s3cr3t-marker-7f1d"

// putConfigMap stores a ConfigMap as a scheduler does (docs/contract.md section 11).
func (n *node) putConfigMap(t testing.TB, name string, data map[string]string) {
	t.Helper()
	jetlettest.PutConfigMap(t, n.js, name, data)
}

// putSecret seals an Opaque Secret for the node's xkey (from its record)
// and stores it.
func (n *node) putSecret(t *testing.T, name string, data map[string]string) {
	t.Helper()
	n.putSecretOfType(t, name, corev1.SecretTypeOpaque, data)
}

func (n *node) putSecretOfType(t *testing.T, name string, typ corev1.SecretType, data map[string]string) {
	t.Helper()
	rec := n.waitRecord(t, 30*time.Second, func(rec schemas.NodeRecord) bool { return rec.XKey != "" })
	jetlettest.PutSecret(t, n.js, n.name, rec.XKey, name, typ, data)
}

// containerLog is what the pod's container app has written so far.
func (n *node) containerLog(t *testing.T, uid string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(n.dataDir, "logs", "default_p-"+strings.ToLower(uid)+"_"+uid, "app", "*.log"))
	var all []byte
	for _, f := range files {
		data, _ := os.ReadFile(f)
		all = append(all, data...)
	}
	return string(all)
}

// A ConfigMap and a Secret sealed for the node reach a pod of the default
// runtime at the default Pod Security level: files with their items and
// modes, env, envFrom with a prefix, and the downward API's labels and
// memory limit in a volume. An update of the ConfigMap reaches the
// mounted file while the pod runs; a pod waiting for a ConfigMap that does
// not exist yet starts once it is put, without a new intent. The Secret's
// value is nowhere but in the pod: not in the servers' store, jetlet's log,
// the results, events or statuses.
func TestConfigMapsAndSecretsReachThePod(t *testing.T) {
	dataDir := shortDir(t)
	// Registered before the node starts, so it runs after jetlet is gone:
	// the Secret's volume is a tmpfs jetlet's garbage collection would
	// have unmounted.
	t.Cleanup(func() { unmountUnder(t, dataDir) })
	n := startNode(t, dataDir, "")
	n.putConfigMap(t, "app", map[string]string{"greeting": "hello-v1", "color": "blue"})
	n.putSecret(t, "db", map[string]string{"password": secretMarker})

	script := `cat /etc/sec/pw; echo; stat -c %a /etc/sec/..data/pw; echo "env $GREETING $PASSWORD $APP_color"; ` +
		`echo "labels $(cat /etc/pod/labels) memory $(cat /etc/pod/mem)"; ` +
		`while true; do echo "file $(cat /etc/cfg/hello)"; sleep 0.1; done`
	n.publish("cfg", editPod(t, podJSON("cfg", 1, "Always", script), func(p *corev1.Pod) {
		mode := int32(0o400)
		p.Spec.Volumes = []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"},
				Items:                []corev1.KeyToPath{{Key: "greeting", Path: "hello"}}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "db", Items: []corev1.KeyToPath{{Key: "password", Path: "pw", Mode: &mode}}}}},
			{Name: "pod", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
			}}}},
		}
		p.Labels = map[string]string{"tier": "web"}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec"}, {Name: "pod", MountPath: "/etc/pod"}}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		c.Env = []corev1.EnvVar{
			{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "greeting"}}},
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		}
		c.EnvFrom = []corev1.EnvFromSource{{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}
	}))
	if r := n.results("cfg", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("cfg: %s %s", r.Outcome, r.Error)
	}
	poll.Until(t, 60*time.Second, func() string { return "the pod's files and env; log: " + n.containerLog(t, "cfg") }, func() bool {
		log := n.containerLog(t, "cfg")
		return strings.Contains(log, " "+secretMarker+"\n") && strings.Contains(log, " 400\n") &&
			strings.Contains(log, "env hello-v1 "+secretMarker+" blue\n") && strings.Contains(log, "file hello-v1\n") &&
			strings.Contains(log, `labels tier="web" memory 64`+"\n")
	})

	// An update reaches the mounted file, not the env.
	updated := time.Now()
	n.putConfigMap(t, "app", map[string]string{"greeting": "hello-v2", "color": "blue"})
	poll.Until(t, 30*time.Second, poll.Msg("the update in the mounted file"), func() bool {
		return strings.Contains(n.containerLog(t, "cfg"), "file hello-v2\n")
	})
	t.Logf("a ConfigMap put reached the pod's file in %s", time.Since(updated).Round(time.Millisecond))

	// A container waiting for its ConfigMap starts once it is put.
	n.publish("waiter", editPod(t, podJSON("waiter", 1, "Always", `echo "got $LATER"; exec sleep 3600`), func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LATER", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "v"}}}}
	}))
	n.waitStatus("waiter", 60*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].Reason == "CreateContainerConfigError"
	})
	n.putConfigMap(t, "later", map[string]string{"v": "at-last"})
	n.waitEvent("waiter", schemas.EventContainerStarted, 60*time.Second, nil)
	poll.Until(t, 30*time.Second, poll.Msg("the waiter's env"), func() bool {
		return strings.Contains(n.containerLog(t, "waiter"), "got at-last\n")
	})

	// The Secret's value is in the pod only.
	var leaks []string
	for _, s := range []struct{ where, text string }{
		{"jetlet's log", n.proc.Logs()},
		{"results", string(mustJSON(readMsgs[json.RawMessage](t, n.js, schemas.StreamResults, "jetlet.result.>")))},
		{"events", string(mustJSON(readMsgs[json.RawMessage](t, n.js, schemas.StreamEvents, "jetlet.event.>")))},
	} {
		if strings.Contains(s.text, secretMarker) {
			leaks = append(leaks, s.where)
		}
	}
	for _, uid := range []string{"cfg", "waiter"} {
		if st, _ := n.status(uid); strings.Contains(string(mustJSON(st)), secretMarker) {
			leaks = append(leaks, uid+"'s status")
		}
	}
	err := filepath.WalkDir(filepath.Join(n.dataDir, "nats"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && bytes.Contains(data, []byte(secretMarker)) {
			leaks = append(leaks, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(leaks) > 0 {
		t.Errorf("the Secret's value is in %s", strings.Join(slices.Compact(leaks), ", "))
	}
}

// A private image pulled with a pod's imagePullSecret, a docker-registry
// Secret sealed for the node, on a node that has no credentials of its own:
// the pod without it cannot pull, the pod with it runs; the password shows
// nowhere in jetlet's log, the results or the statuses.
func TestImagePullSecretPullsAPrivateImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the embedded runtime runs images as root only")
	}
	const password = "pull-s3cr3t-7c2e"
	registry := testimages.Serve(t, map[string]v1.Image{"team/layered:1": testimages.Must(t, testimages.Layered)},
		testimages.WithBasicAuth("jetlet", password))
	n := startNode(t, shortDir(t), "", "--log-level", "trace")
	auth := base64.StdEncoding.EncodeToString([]byte("jetlet:" + password))
	n.putSecretOfType(t, "regcred", corev1.SecretTypeDockerConfigJson, map[string]string{
		corev1.DockerConfigJsonKey: fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, registry, auth),
	})
	n.publish("without", imagePodJSON("without", registry+"/team/layered:1"))
	n.waitEvent("without", schemas.EventImagePullFailed, 60*time.Second, nil)
	n.publish("with", editPod(t, imagePodJSON("with", registry+"/team/layered:1"), func(p *corev1.Pod) {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	}))
	n.waitStatus("with", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	texts := []string{n.proc.Logs(),
		string(mustJSON(readMsgs[json.RawMessage](t, n.js, schemas.StreamResults, "jetlet.result.>"))),
		string(mustJSON(readMsgs[json.RawMessage](t, n.js, schemas.StreamEvents, "jetlet.event.>")))}
	for _, uid := range []string{"with", "without"} {
		st, _ := n.status(uid)
		texts = append(texts, string(mustJSON(st)))
	}
	for _, text := range texts {
		if strings.Contains(text, password) || strings.Contains(text, auth) {
			t.Fatal("the pull secret's password shows in jetlet's log, a result, an event or a status")
		}
	}
}

// A kubernetes.io/tls Secret made with `jetlet create secret tls` reaches a
// pod's secret volume; the secret volume, a downwardAPI one and a projected
// one of a ConfigMap and the downward API (no Secret) are each a tmpfs in
// the container, as kubelet keeps them, a configMap volume is not, and the
// pod's delete leaves no mount behind.
func TestInMemoryVolumesAreTmpfsInTheContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("secret and projected volumes need a tmpfs, which needs root")
	}
	dataDir := shortDir(t)
	// Registered before the node starts, so it runs after jetlet is gone.
	t.Cleanup(func() { unmountUnder(t, dataDir) })
	n := startNode(t, dataDir, "")
	n.waitRecord(t, 30*time.Second, func(rec schemas.NodeRecord) bool { return rec.XKey != "" })
	crt, key, err := testimages.KeyPairPEM("web.example.com")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	crtFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for file, content := range map[string][]byte{crtFile: crt, keyFile: key} {
		if err := os.WriteFile(file, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	create := exec.Command(jetlettest.Binary(t), "create", "secret", "tls", "web-tls", "--cert", crtFile, "--key", keyFile,
		"--node", "n1", "--nats-url", n.proc.NATSURL(), "--data-dir", dataDir)
	if out, err := create.CombinedOutput(); err != nil || !strings.Contains(string(out), "secret/default/web-tls sealed for node n1 (created)") {
		t.Fatalf("jetlet create secret tls: %v\n%s", err, out)
	}
	n.putConfigMap(t, "app", map[string]string{"mode": "prod"})

	script := `grep -E ' /etc/(tls|info|pod|plain) ' /proc/mounts | awk '{print "mount", $2, $3}'; ` +
		`echo "crt $(head -n 1 /etc/tls/tls.crt) mode $(cat /etc/info/mode) name $(cat /etc/info/name)"; exec sleep 600`
	n.publish("tls", editPod(t, podJSON("tls", 1, "Always", script), func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{
			{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls"}}},
			{Name: "info", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
			}}}},
			{Name: "pod", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "uid", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}}}},
			{Name: "plain", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/tls"}, {Name: "info", MountPath: "/etc/info"},
			{Name: "pod", MountPath: "/etc/pod"}, {Name: "plain", MountPath: "/etc/plain"}}
	}))
	if r := n.results("tls", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s", r.Outcome, r.Error)
	}
	var log string
	poll.Until(t, 60*time.Second, func() string { return "the container's report; log: " + log }, func() bool {
		log = n.containerLog(t, "tls")
		return strings.Contains(log, "crt ")
	})
	for _, want := range []string{"mount /etc/tls tmpfs\n", "mount /etc/info tmpfs\n", "mount /etc/pod tmpfs\n", "crt -----BEGIN CERTIFICATE----- mode prod name p-tls\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("the container's report lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "mount /etc/plain tmpfs") || !strings.Contains(log, "mount /etc/plain ") {
		t.Errorf("the configMap volume is not on disk as kubelet keeps it:\n%s", log)
	}
	if !slices.ContainsFunc(mountsUnder(t, dataDir), func(m string) bool { return strings.HasSuffix(m, "/kubernetes.io~projected/info") }) {
		t.Errorf("the projected volume's host directory is no mount point: %v", mountsUnder(t, dataDir))
	}

	n.publish("tls", deleteJSON("tls", 2, 2))
	if r := n.results("tls", 2)[1]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("delete: %s %s", r.Outcome, r.Error)
	}
	n.waitEvent("tls", schemas.EventPodTerminated, 30*time.Second, nil)
	if left := mountsUnder(t, dataDir); len(left) > 0 {
		t.Errorf("mounts left after the delete: %v", left)
	}
}
