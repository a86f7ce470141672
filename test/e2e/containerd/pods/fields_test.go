package containerd_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// On containerd, through the CRI: the resource downward API in the
// container's environment, and an emptyDir of medium Memory that is a tmpfs
// (jetlet mounts it on the host directory the runtime bind-mounts).
func TestResourceFieldRefAndMemoryEmptyDirOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("fields")
	script := `echo "fields: $CPU_M $MEM_MI $(stat -f -c %T /ram)"; ` + untilTerm
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	body := fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":"Always","hostNetwork":true,"terminationGracePeriodSeconds":5,
	      "volumes":[{"name":"ram","emptyDir":{"medium":"Memory","sizeLimit":"8Mi"}}],
	      "containers":[{"name":"app","image":%q,"imagePullPolicy":"IfNotPresent","command":%s,
	        "resources":{"limits":{"cpu":"1500m","memory":"64Mi"}},
	        "volumeMounts":[{"name":"ram","mountPath":"/ram"}],
	        "env":[{"name":"CPU_M","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1m"}}},
	               {"name":"MEM_MI","valueFrom":{"resourceFieldRef":{"resource":"limits.memory","divisor":"1Mi"}}}]}]}}}`,
		uid, uid, runLabel, s.runID, s.env.image, cmd)
	st := n.applyRunning(uid, body)
	s.waitLog(st.Containers[0].ContainerID, "fields: 1500 64 tmpfs", 30*time.Second)
}
