package containerd_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
)

// On containerd: a ConfigMap and a Secret sealed for the node reach the
// pod as files (the Secret's on a tmpfs jetlet mounts) and env, and an
// update of the ConfigMap reaches the mounted file while env keeps the
// value the container started with.
func TestConfigMapsAndSecretsReachThePodOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	rec := n.waitRecord(t, "the node record's xkey", func(rec schemas.NodeRecord) bool { return rec.XKey != "" })
	cm := "app-" + s.runID
	jetlettest.PutConfigMap(t, n.js, cm, map[string]string{"greeting": "hello-v1"})
	jetlettest.PutSecret(t, n.js, n.name, rec.XKey, "db-"+s.runID, corev1.SecretTypeOpaque, map[string]string{"password": "ctrd-pw"})

	uid := s.uid("config")
	script := `echo "env $GREETING $(cat /etc/sec/password) $(stat -f -c %T /etc/sec)"; ` +
		`while true; do echo "file $(cat /etc/cfg/greeting)"; sleep 0.2; done`
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	body := fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":"Always","hostNetwork":true,"terminationGracePeriodSeconds":1,
	      "volumes":[{"name":"cfg","configMap":{"name":%q}},{"name":"sec","secret":{"secretName":%q}}],
	      "containers":[{"name":"app","image":%q,"imagePullPolicy":"IfNotPresent","command":%s,
	        "volumeMounts":[{"name":"cfg","mountPath":"/etc/cfg"},{"name":"sec","mountPath":"/etc/sec"}],
	        "env":[{"name":"GREETING","valueFrom":{"configMapKeyRef":{"name":%q,"key":"greeting"}}}]}]}}}`,
		uid, uid, runLabel, s.runID, cm, "db-"+s.runID, s.env.image, cmd, cm)
	st := n.applyRunning(uid, body)
	s.waitLog(st.Containers[0].ContainerID, "env hello-v1 ctrd-pw tmpfs", 30*time.Second)
	s.waitLog(st.Containers[0].ContainerID, "file hello-v1", 30*time.Second)
	jetlettest.PutConfigMap(t, n.js, cm, map[string]string{"greeting": "hello-v2"})
	s.waitLog(st.Containers[0].ContainerID, "file hello-v2", 30*time.Second)
}
