package eviction

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/schemas"
)

const (
	lowPriority  = -1
	highPriority = 1
)

// newPod is a pod named and identified name, of priority, with one container
// of the same name requesting requests.
func newPod(name string, priority int32, requests corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PodSpec{
			Priority:   &priority,
			Containers: []corev1.Container{{Name: name, Resources: corev1.ResourceRequirements{Requests: requests}}},
		},
	}
}

func memoryRequest(q string) corev1.ResourceList {
	if q == "" {
		return nil
	}
	return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
}

func storageRequest(q string) corev1.ResourceList {
	if q == "" {
		return nil
	}
	return corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}
}

func mi(n int64) int64 { return n << 20 }

// diskUsed is a pod whose one container has a writable layer and logs, and
// whose volumes use volumes (bytes and, as inodes, the same numbers).
func diskUsed(name string, layer, logs, volumes int64) PodUsage {
	return PodUsage{
		Containers: []ContainerUsage{{Name: name, WritableLayer: &DiskUsage{layer, layer}, Logs: &DiskUsage{logs, logs}}},
		Volumes:    DiskUsage{volumes, volumes},
	}
}

func names(pods []*corev1.Pod) []string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name)
	}
	return n
}

func checkRank(t *testing.T, pods []*corev1.Pod, signal Signal, usage map[string]PodUsage, dedicatedImageFs bool, want []string) {
	t.Helper()
	rankPods(pods, signal, usage, dedicatedImageFs, false)
	if got := names(pods); !slices.Equal(got, want) {
		t.Fatalf("ranked %v\n want %v", got, want)
	}
}

// requestsOrder is how kubelet ranks the eight pods of its
// TestOrderedByPriorityMemory and TestOrderedByPriorityDisk: those above
// their requests first, then by priority, then by usage above requests.
var requestsOrder = []string{
	"above-requests-low-priority-high-usage", "above-requests-low-priority-low-usage",
	"above-requests-high-priority-high-usage", "above-requests-high-priority-low-usage",
	"below-requests-low-priority-high-usage", "below-requests-low-priority-low-usage",
	"below-requests-high-priority-high-usage", "below-requests-high-priority-low-usage",
}

// requestsTestPods are those pods, last to evict first: a low-priority pod
// above its requests requests nothing, a high-priority one 100Mi, a pod
// below its requests 1Gi (of what request makes a list of).
func requestsTestPods(request func(string) corev1.ResourceList) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, name := range slices.Backward(requestsOrder) {
		priority, amount := int32(highPriority), "1Gi"
		if strings.Contains(name, "low-priority") {
			priority = lowPriority
		}
		switch {
		case strings.HasPrefix(name, "above-requests-low"):
			amount = ""
		case strings.HasPrefix(name, "above-requests-high"):
			amount = "100Mi"
		}
		pods = append(pods, newPod(name, priority, request(amount)))
	}
	return pods
}

// kubelet's TestOrderedByExceedsRequestMemory and TestOrderedByPriorityMemory.
func TestRankMemoryPressure(t *testing.T) {
	t.Run("exceeding requests first", func(t *testing.T) {
		below := newPod("below-requests", lowPriority, memoryRequest("200Mi"))
		exceeds := newPod("exceeds-requests", highPriority, memoryRequest("100Mi"))
		usage := map[string]PodUsage{"below-requests": {MemoryWorkingSet: mi(199)}, "exceeds-requests": {MemoryWorkingSet: mi(101)}}
		checkRank(t, []*corev1.Pod{below, exceeds}, SignalMemoryAvailable, usage, false, []string{"exceeds-requests", "below-requests"})
	})
	t.Run("then priority, then usage above requests", func(t *testing.T) {
		pods := requestsTestPods(memoryRequest)
		usage := map[string]PodUsage{
			"above-requests-low-priority-high-usage":  {MemoryWorkingSet: mi(500)}, // 500 above request
			"above-requests-low-priority-low-usage":   {MemoryWorkingSet: mi(50)},  // 50
			"above-requests-high-priority-high-usage": {MemoryWorkingSet: mi(600)}, // 500
			"above-requests-high-priority-low-usage":  {MemoryWorkingSet: mi(150)}, // 50
			"below-requests-low-priority-high-usage":  {MemoryWorkingSet: mi(800)}, // -200
			"below-requests-low-priority-low-usage":   {MemoryWorkingSet: mi(200)}, // -800
			"below-requests-high-priority-high-usage": {MemoryWorkingSet: mi(800)}, // -200
			"below-requests-high-priority-low-usage":  {MemoryWorkingSet: mi(200)}, // -800
		}
		checkRank(t, pods, SignalMemoryAvailable, usage, false, requestsOrder)
	})
	t.Run("a pod the runtime did not report first", func(t *testing.T) {
		measured := newPod("measured", lowPriority, nil)
		unmeasured := newPod("unmeasured", highPriority, memoryRequest("1Gi"))
		usage := map[string]PodUsage{"measured": {MemoryWorkingSet: mi(900)}}
		checkRank(t, []*corev1.Pod{measured, unmeasured}, SignalMemoryAvailable, usage, false, []string{"unmeasured", "measured"})
	})
}

// kubelet's TestOrderedByExceedsRequestDisk and TestOrderedByPriorityDisk.
func TestRankDiskPressure(t *testing.T) {
	t.Run("exceeding requests first", func(t *testing.T) {
		below := newPod("below-requests", lowPriority, storageRequest("200Mi"))
		exceeds := newPod("exceeds-requests", highPriority, storageRequest("100Mi"))
		usage := map[string]PodUsage{"below-requests": diskUsed("below-requests", mi(100), mi(99), 0), "exceeds-requests": diskUsed("exceeds-requests", mi(90), mi(11), 0)}
		checkRank(t, []*corev1.Pod{below, exceeds}, SignalNodeFsAvailable, usage, false, []string{"exceeds-requests", "below-requests"})
	})
	usage := map[string]PodUsage{
		"above-requests-low-priority-high-usage":  diskUsed("above-requests-low-priority-high-usage", mi(200), mi(100), mi(200)),  // 500 above request
		"above-requests-low-priority-low-usage":   diskUsed("above-requests-low-priority-low-usage", mi(10), mi(10), mi(30)),      // 50
		"above-requests-high-priority-high-usage": diskUsed("above-requests-high-priority-high-usage", mi(200), mi(150), mi(250)), // 500
		"above-requests-high-priority-low-usage":  diskUsed("above-requests-high-priority-low-usage", mi(90), mi(50), mi(10)),     // 50
		"below-requests-low-priority-high-usage":  diskUsed("below-requests-low-priority-high-usage", mi(500), mi(200), mi(100)),  // -200
		"below-requests-low-priority-low-usage":   diskUsed("below-requests-low-priority-low-usage", mi(50), mi(100), mi(50)),     // -800
		"below-requests-high-priority-high-usage": diskUsed("below-requests-high-priority-high-usage", mi(250), mi(500), mi(50)),  // -200
		"below-requests-high-priority-low-usage":  diskUsed("below-requests-high-priority-low-usage", mi(100), mi(60), mi(40)),    // -800
	}
	for _, signal := range []Signal{SignalNodeFsAvailable, SignalImageFsAvailable} {
		t.Run("one file system: "+string(signal)+" counts layers, logs and volumes", func(t *testing.T) {
			checkRank(t, requestsTestPods(storageRequest), signal, usage, false, requestsOrder)
		})
	}
	t.Run("inodes: nobody requests them, so priority, then inodes used", func(t *testing.T) {
		ps := []*corev1.Pod{
			newPod("high-priority-low-usage", highPriority, storageRequest("1Gi")),
			newPod("high-priority-high-usage", highPriority, nil),
			newPod("low-priority-low-usage", lowPriority, nil),
			newPod("low-priority-high-usage", lowPriority, storageRequest("1Gi")),
		}
		inodes := map[string]PodUsage{
			"low-priority-high-usage":  diskUsed("low-priority-high-usage", 50000, 100000, 250000),  // 400000
			"low-priority-low-usage":   diskUsed("low-priority-low-usage", 60000, 30000, 10000),     // 100000
			"high-priority-high-usage": diskUsed("high-priority-high-usage", 150000, 150000, 50000), // 350000
			"high-priority-low-usage":  diskUsed("high-priority-low-usage", 10000, 40000, 100000),   // 150000
		}
		checkRank(t, ps, SignalNodeFsInodesFree, inodes, false,
			[]string{"low-priority-high-usage", "low-priority-low-usage", "high-priority-high-usage", "high-priority-low-usage"})
	})
	t.Run("dedicated imagefs: nodefs counts logs and volumes, imagefs writable layers", func(t *testing.T) {
		ps := func() []*corev1.Pod {
			return []*corev1.Pod{newPod("big-layer", 0, nil), newPod("big-logs", 0, nil)}
		}
		u := map[string]PodUsage{"big-layer": diskUsed("big-layer", mi(900), mi(10), mi(10)), "big-logs": diskUsed("big-logs", mi(10), mi(500), mi(100))}
		checkRank(t, ps(), SignalNodeFsAvailable, u, true, []string{"big-logs", "big-layer"})
		checkRank(t, ps(), SignalImageFsAvailable, u, true, []string{"big-layer", "big-logs"})
		checkRank(t, ps(), SignalContainerFsAvailable, u, true, []string{"big-layer", "big-logs"})
	})
	// kubelet's buildSignalToRankFunc with imageContainerSplitFs.
	t.Run("split image fs: nodefs and containerfs count everything, imagefs nothing of a pod's", func(t *testing.T) {
		u := map[string]PodUsage{"big-layer": diskUsed("big-layer", mi(900), mi(10), mi(10)), "big-logs": diskUsed("big-logs", mi(10), mi(500), mi(100))}
		for _, signal := range []Signal{SignalNodeFsAvailable, SignalContainerFsAvailable} {
			pods := []*corev1.Pod{newPod("big-logs", 0, nil), newPod("big-layer", 0, nil)}
			rankPods(pods, signal, u, true, true)
			if got := names(pods); !slices.Equal(got, []string{"big-layer", "big-logs"}) {
				t.Errorf("%s: ranked %v, want the most disk first", signal, got)
			}
		}
		pods := []*corev1.Pod{newPod("big-logs", 0, nil), newPod("big-layer", 0, nil)}
		rankPods(pods, SignalImageFsAvailable, u, true, true)
		if got := names(pods); !slices.Equal(got, []string{"big-logs", "big-layer"}) {
			t.Errorf("imagefs: ranked %v, want the order unchanged (no pod uses the images' file system)", got)
		}
	})
}

// kubelet's TestOrderedByPriorityProcess.
func TestRankPIDPressure(t *testing.T) {
	pods := []*corev1.Pod{
		newPod("high-priority-low-usage", highPriority, nil),
		newPod("high-priority-high-usage", highPriority, nil),
		newPod("low-priority-low-usage", lowPriority, nil),
		newPod("low-priority-high-usage", lowPriority, nil),
	}
	usage := map[string]PodUsage{
		"low-priority-high-usage":  {Processes: 20},
		"low-priority-low-usage":   {Processes: 6},
		"high-priority-high-usage": {Processes: 20},
		"high-priority-low-usage":  {Processes: 5},
	}
	checkRank(t, pods, SignalPIDAvailable, usage, false,
		[]string{"low-priority-high-usage", "low-priority-low-usage", "high-priority-high-usage", "high-priority-low-usage"})
}

func TestIsCritical(t *testing.T) {
	for _, tc := range []struct {
		priority *int32
		want     bool
	}{
		{nil, false},
		{ptr(int32(1000)), false},
		{ptr(SystemCriticalPriority - 1), false},
		{ptr(SystemCriticalPriority), true},
		{ptr(SystemCriticalPriority + 1000), true},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Priority: tc.priority}}
		if got := IsCritical(pod); got != tc.want {
			t.Errorf("priority %v: critical = %v; want %v", tc.priority, got, tc.want)
		}
	}
	// A system class named without a priority: critical once the pod has
	// the defaults every decoded intent gets.
	for _, class := range []string{schemas.SystemNodeCritical, schemas.SystemClusterCritical} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: class}}
		schemas.SetPodDefaults(pod)
		if !IsCritical(pod) {
			t.Errorf("a pod of class %s without a priority is not critical", class)
		}
	}
}

func ptr[T any](v T) *T { return &v }
