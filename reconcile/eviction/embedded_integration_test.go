package eviction

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/testimages"
	"github.com/jetlet/jetlet/test/tmpfstest"
)

// splitNode is the roles the manager acts through, over a real runtime:
// its one pod is evicted by removing its sandbox, and the collectors only
// count their calls.
type splitNode struct {
	client  *runtime.Client
	pod     *corev1.Pod
	sandbox string

	mu                     sync.Mutex
	imageGCs, containerGCs int
	evicted                []string // messages
}

func (n *splitNode) DeleteUnusedImages(context.Context) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.imageGCs++
	return 0, nil
}

func (n *splitNode) DeleteAllUnusedContainers(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.containerGCs++
	return nil
}

func (n *splitNode) ActivePods() []*corev1.Pod { return []*corev1.Pod{n.pod} }

func (n *splitNode) Evict(ctx context.Context, uid string, _ int64, _, message string) error {
	n.mu.Lock()
	n.evicted = append(n.evicted, message)
	n.mu.Unlock()
	return n.client.RemovePodSandbox(ctx, n.sandbox)
}

// TestContainerFsPressureOnASplitImageFs runs the embedded runtime with its
// image store on one tmpfs and its containers on another (KEP-4191's split
// image file system). ImageFsInfo names both, each with what the runtime
// uses of it; a container filling its root fills the containers' tmpfs
// alone. With --eviction-hard nodefs.available<24Mi (the data dir on the
// host's disk, far from it) the containerfs threshold kubelet derives from
// it is met on the containers' tmpfs: DiskPressure, no image or container
// collection (kubelet reclaims nothing for containerfs), the pod evicted.
func TestContainerFsPressureOnASplitImageFs(t *testing.T) {
	const size = 64 << 20
	containerFs, imageFs := tmpfstest.Mount(t, size, 0), tmpfstest.Mount(t, size, 0)
	stateDir := filepath.Join(containerFs, "state")
	sockDir, err := os.MkdirTemp("", "jes") // short: the socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	client := jetlettest.StartEmbedded(t, embedded.Config{Dir: stateDir, ImageDir: imageFs, ShimPath: gobuild.Shim.Path(t), ImageMirror: testimages.ServeLibrary(t)}, sockDir)

	// A pod whose container writes 40Mi into its root.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: "default", UID: types.UID("uid-filler")}}
	sandboxCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Uid: string(pod.UID), Namespace: pod.Namespace},
		Labels:       map[string]string{crilabels.LabelPodUID: string(pod.UID)},
		LogDirectory: t.TempDir(),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	ctx := t.Context()
	sandbox, err := client.RunPodSandbox(ctx, sandboxCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox:1.36"}, nil, sandboxCfg); err != nil {
		t.Fatal(err)
	}
	id, err := client.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "fill"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Command:  []string{"sh", "-c", "dd if=/dev/zero of=/fill bs=1M count=40 && touch /filled && exec sleep 3600"},
		LogPath:  "fill.log",
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}, sandboxCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	filled := func() bool {
		resp, err := client.ExecSync(ctx, id, []string{"test", "-e", "/filled"}, 10*time.Second)
		return err == nil && resp.GetExitCode() == 0
	}
	poll.Until(t, time.Minute, poll.Msg("the container fills its root"), filled)

	info, err := client.ImageFsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	images, containers := info.GetImageFilesystems(), info.GetContainerFilesystems()
	if len(images) != 1 || len(containers) != 1 {
		t.Fatalf("ImageFsInfo: %v", info)
	}
	t.Logf("image fs %s: %d bytes, %d inodes; container fs %s: %d bytes, %d inodes",
		images[0].GetFsId().GetMountpoint(), images[0].GetUsedBytes().GetValue(), images[0].GetInodesUsed().GetValue(),
		containers[0].GetFsId().GetMountpoint(), containers[0].GetUsedBytes().GetValue(), containers[0].GetInodesUsed().GetValue())
	if mp := images[0].GetFsId().GetMountpoint(); mp != imageFs {
		t.Errorf("image fs mountpoint %s, want the image store %s", mp, imageFs)
	}
	if mp := containers[0].GetFsId().GetMountpoint(); !strings.HasPrefix(mp, containerFs+"/") {
		t.Errorf("container fs mountpoint %s, want under %s", mp, containerFs)
	}
	if used := containers[0].GetUsedBytes().GetValue(); used < 40<<20 {
		t.Errorf("container fs used %d bytes, want the 40Mi written at least", used)
	}
	if used := images[0].GetUsedBytes().GetValue(); used == 0 || used >= 40<<20 {
		t.Errorf("image fs used %d bytes, want busybox's alone", used)
	}

	thresholds, err := ParseThresholds("nodefs.available<24Mi", "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	observer, err := NewNodeObserver(client, NodeObserverConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observer.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfs, ifs := obs.Signals[SignalContainerFsAvailable], obs.Signals[SignalImageFsAvailable]
	nfs := obs.Signals[SignalNodeFsAvailable]
	t.Logf("containerfs.available %s of %s, imagefs.available %s of %s, nodefs.available %s",
		&cfs.Available, &cfs.Capacity, &ifs.Available, &ifs.Capacity, &nfs.Available)
	if !obs.DedicatedImageFs || !obs.SplitContainerFs || cfs.Capacity.Value() != size || cfs.Available.Value() >= 24<<20 || ifs.Available.Value() < 40<<20 {
		t.Fatalf("observed dedicated imagefs %v, split %v, containerfs %s of %s, imagefs %s available",
			obs.DedicatedImageFs, obs.SplitContainerFs, &cfs.Available, &cfs.Capacity, &ifs.Available)
	}

	node := &splitNode{client: client, pod: pod, sandbox: sandbox}
	m, err := New(observer, node, node, node, Config{Thresholds: thresholds})
	if err != nil {
		t.Fatal(err)
	}
	if evicted := m.synchronize(ctx); evicted != pod {
		t.Fatalf("evicted %v, want the pod filling the containers' file system", evicted)
	}
	if got := m.Pressure(); len(got) != 1 || got[0] != corev1.NodeDiskPressure {
		t.Errorf("pressure %v, want DiskPressure", got)
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.imageGCs != 0 || node.containerGCs != 0 {
		t.Errorf("image GCs %d, container GCs %d; kubelet reclaims nothing for containerfs", node.imageGCs, node.containerGCs)
	}
	t.Logf("eviction messages %q", node.evicted)
	want := "The node was low on resource: ephemeral-storage. Threshold quantity: 24Mi, available: "
	if len(node.evicted) != 1 || !strings.HasPrefix(node.evicted[0], want) {
		t.Errorf("eviction messages %q, want one starting %q", node.evicted, want)
	}
}
