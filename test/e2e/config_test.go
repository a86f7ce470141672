package e2e_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
	"github.com/jetlet/jetlet/test/poll"
)

// secretMarker is the Secret's value: it must reach the pod and nothing
// else (the store, jetlet's log, results, events, statuses).
const secretMarker = "s3cr3t-marker-7f1d"

// putConfigMap stores a ConfigMap as a scheduler does (CONTRACT section 11).
func (n *node) putConfigMap(t *testing.T, name string, data map[string]string) {
	t.Helper()
	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}
	n.putKV(t, schemas.BucketConfigMaps, "default."+name, cm)
}

// putSecret seals a Secret for the node's xkey (from its record) and stores it.
func (n *node) putSecret(t *testing.T, name string, data map[string]string) {
	t.Helper()
	rec := n.waitRecord(t, 30*time.Second, func(rec schemas.NodeRecord) bool { return rec.XKey != "" })
	s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, StringData: data, Type: corev1.SecretTypeOpaque}
	s.Data = map[string][]byte{}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
	ss, err := sealed.Seal(s, n.name, rec.XKey)
	if err != nil {
		t.Fatal(err)
	}
	n.putKV(t, schemas.BucketSecrets, sealed.SecretKey(n.name, "default", name), ss)
}

func (n *node) putKV(t *testing.T, bucket, key string, v any) {
	t.Helper()
	kv, err := n.js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), key, data); err != nil {
		t.Fatal(err)
	}
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
// modes, env, envFrom with a prefix. An update of the ConfigMap reaches the
// mounted file while the pod runs; a pod waiting for a ConfigMap that does
// not exist yet starts once it is put, without a new intent. The Secret's
// value is nowhere but in the pod: not in the servers' store, jetlet's log,
// the results, events or statuses.
func TestConfigMapsAndSecretsReachThePod(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	n.putConfigMap(t, "app", map[string]string{"greeting": "hello-v1", "color": "blue"})
	n.putSecret(t, "db", map[string]string{"password": secretMarker})

	script := `cat /etc/sec/pw; echo; stat -c %a /etc/sec/..data/pw; echo "env $GREETING $PASSWORD $APP_color"; ` +
		`while true; do echo "file $(cat /etc/cfg/hello)"; sleep 0.1; done`
	n.publish("cfg", editPod(t, podJSON("cfg", 1, "Always", script), func(p *corev1.Pod) {
		mode := int32(0o400)
		p.Spec.Volumes = []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"},
				Items:                []corev1.KeyToPath{{Key: "greeting", Path: "hello"}}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "db", Items: []corev1.KeyToPath{{Key: "password", Path: "pw", Mode: &mode}}}}},
		}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec"}}
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
			strings.Contains(log, "env hello-v1 "+secretMarker+" blue\n") && strings.Contains(log, "file hello-v1\n")
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
