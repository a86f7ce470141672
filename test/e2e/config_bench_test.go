package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
)

// BenchmarkConfigMapUpdateReachesThePod puts b.N new values of a ConfigMap
// a running pod mounts and reports the time from each put to the pod's file
// holding it (read on the node, where the pod's volume is), p50 and p99:
//
//	go test -run '^$' -bench ConfigMapUpdate -benchtime 100x ./test/e2e
func BenchmarkConfigMapUpdateReachesThePod(b *testing.B) {
	n := startNode(b, shortDir(b), "")
	n.putConfigMap(b, "bench", map[string]string{"value": "v-start"})
	n.publish("reader", editPod(b, podJSON("reader", 1, "Always", "exec sleep 3600"), func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "bench"}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}
	}))
	n.waitEvent("reader", schemas.EventContainerStarted, 60*time.Second, nil)
	file := filepath.Join(n.dataDir, "pods", "reader", "volumes", "kubernetes.io~configmap", "cfg", "value")
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		want := fmt.Sprintf("v-%d", i)
		put := time.Now()
		n.putConfigMap(b, "bench", map[string]string{"value": want})
		for {
			if data, _ := os.ReadFile(file); string(data) == want {
				break
			}
			if time.Since(put) > time.Minute {
				b.Fatalf("value %d not in %s after a minute", i, file)
			}
			time.Sleep(time.Millisecond) // a benchmark's sampling, not a test's synchronisation
		}
		lat = append(lat, time.Since(put))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
