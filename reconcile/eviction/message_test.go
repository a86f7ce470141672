package eviction

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestEvictionMessage(t *testing.T) {
	memory := Threshold{Signal: SignalMemoryAvailable, Value: ThresholdValue{Quantity: quantity("100Mi")}}
	nodefs := Threshold{Signal: SignalNodeFsAvailable, Value: ThresholdValue{Percentage: 0.1}}
	pids := Threshold{Signal: SignalPIDAvailable, Value: ThresholdValue{Quantity: quantity("1000")}}
	signals := map[Signal]Observation{
		SignalMemoryAvailable: {Available: *resource.NewQuantity(57964<<10, resource.BinarySI), Capacity: resource.MustParse("24Gi")},
		SignalNodeFsAvailable: {Available: *resource.NewQuantity(1600496<<10, resource.BinarySI), Capacity: resource.MustParse("100Gi")},
		SignalPIDAvailable:    {Available: *resource.NewQuantity(900, resource.DecimalSI), Capacity: resource.MustParse("32768")},
	}
	app := newPod("web", 0, nil)
	app.Spec.Containers[0].Name = "app"
	appUsing := func(bytes int64) PodUsage {
		return PodUsage{MemoryWorkingSet: bytes, Containers: []ContainerUsage{{Name: "app", MemoryWorkingSet: &bytes}}}
	}

	twoContainers := newPod("two", 0, memoryRequest("64Mi"))
	twoContainers.Spec.Containers[0].Name = "small"
	twoContainers.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Resources: corev1.ResourceRequirements{Requests: memoryRequest("8Mi")}}}
	small, sidecar := mi(32), mi(10)

	podLevel := newPod("pod-level", 0, nil)
	podLevel.Spec.Containers[0].Name = "app"
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: memoryRequest("1Mi")}

	fill := newPod("diskfill", 0, nil)
	fill.Spec.Containers[0].Name = "fill"

	tests := []struct {
		name     string
		starved  corev1.ResourceName
		pod      *corev1.Pod
		usage    PodUsage
		measured bool
		met      []Threshold
		want     string
	}{
		{name: "kubelet's memory message", starved: corev1.ResourceMemory, pod: app, usage: appUsing(4523 << 10), measured: true, met: []Threshold{memory},
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 57964Ki. Container app was using 4523Ki, request is 0, has larger consumption of memory. "},
		{name: "only containers above their requests are named", starved: corev1.ResourceMemory, pod: twoContainers, measured: true, met: []Threshold{memory},
			usage: PodUsage{Containers: []ContainerUsage{{Name: "small", MemoryWorkingSet: &small}, {Name: "sidecar", MemoryWorkingSet: &sidecar}}},
			want:  "The node was low on resource: memory. Threshold quantity: 100Mi, available: 57964Ki. Container sidecar was using 10Mi, request is 8Mi, has larger consumption of memory. "},
		{name: "a pod-level request is named too", starved: corev1.ResourceMemory, pod: podLevel, usage: appUsing(2 << 20), measured: true, met: []Threshold{memory},
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 57964Ki. Pod pod-level was using 2Mi, request is 1Mi, has larger consumption of memory. Container app was using 2Mi, request is 0, has larger consumption of memory. "},
		{name: "a pod without stats: the node's part only", starved: corev1.ResourceMemory, pod: app, met: []Threshold{memory},
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 57964Ki. "},
		{name: "ephemeral storage: a percentage's amount, layer and logs", starved: corev1.ResourceEphemeralStorage, pod: fill, measured: true, met: []Threshold{memory, nodefs},
			usage: PodUsage{Containers: []ContainerUsage{{Name: "fill", WritableLayer: &DiskUsage{Bytes: 36 << 10}, Logs: &DiskUsage{Bytes: 4 << 10}}}},
			want:  "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 1600496Ki. Container fill was using 40Ki, request is 0, has larger consumption of ephemeral-storage. "},
		{name: "ephemeral storage: a container whose writable layer the runtime does not measure is not named", starved: corev1.ResourceEphemeralStorage, pod: fill, measured: true, met: []Threshold{nodefs},
			usage: PodUsage{Containers: []ContainerUsage{{Name: "fill", Logs: &DiskUsage{Bytes: 4 << 10}}}},
			want:  "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 1600496Ki. "},
		{name: "pids: no container is named", starved: resourcePIDs, pod: app, usage: PodUsage{Processes: 500}, measured: true, met: []Threshold{pids},
			want: "The node was low on resource: pids. Threshold quantity: 1k, available: 900. "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := evictionMessage(tc.starved, tc.pod, tc.usage, tc.measured, tc.met, signals); got != tc.want {
				t.Fatalf("message\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
