package reconcile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// setUpEmptyDir makes an emptyDir's host directory, as kubelet's emptyDir
// plugin: a directory under the data dir, a tmpfs for medium Memory; mode
// 0777 unless the volume's mode says otherwise; with a pod fsGroup, owned by
// that group, group-writable and setgid (kubelet's SetVolumeOwnership on a
// new volume: nothing inside it to change yet, whatever the
// fsGroupChangePolicy). plugin is the directory of dir's volume type: the
// volumes of API data are emptyDirs underneath, as kubelet wraps them.
func (m *Kuberuntime) setUpEmptyDir(plugin, dir string, pod *corev1.Pod, d *corev1.EmptyDirVolumeSource) error {
	// Its parents are closed to the node's other users (podDirMode): the
	// volume itself is the containers'.
	if _, err := m.makePodDataDir(string(pod.UID), "volumes", plugin); err != nil {
		return err
	}
	switch d.Medium {
	case corev1.StorageMediumDefault:
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
	case corev1.StorageMediumMemory:
		if err := setUpMemoryEmptyDir(dir, m.memoryEmptyDirSize(pod, d)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("emptyDir medium %q is not supported", d.Medium)
	}
	mode := os.FileMode(0o777)
	if d.Mode != nil {
		mode = os.FileMode(*d.Mode) & os.ModePerm
		if *d.Mode&unix.S_ISVTX != 0 {
			mode |= os.ModeSticky
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.FSGroup != nil {
		if err := os.Lchown(dir, -1, int(*psc.FSGroup)); err != nil {
			return fmt.Errorf("fsGroup %d: %w", *psc.FSGroup, err)
		}
		mode |= 0o070 | os.ModeSetgid
	}
	// MkdirAll honours the umask; the mode is set as asked.
	return os.Chmod(dir, mode)
}

// memoryEmptyDirSize is the size of a Memory emptyDir's tmpfs, as kubelet's
// calculateEmptyDirMemorySize: the node's allocatable memory, or less the
// pod's memory limit, or less the volume's sizeLimit. 0 (nothing known):
// tmpfs's default, half of RAM.
func (m *Kuberuntime) memoryEmptyDirSize(pod *corev1.Pod, d *corev1.EmptyDirVolumeSource) int64 {
	size := int64(0)
	if q, ok := m.cfg.NodeAllocatable[corev1.ResourceMemory]; ok {
		size = q.Value()
	}
	lower := func(v int64) {
		if v > 0 && (size == 0 || v <= size) {
			size = v
		}
	}
	lower(podMemoryLimit(pod))
	if d.SizeLimit != nil {
		lower(d.SizeLimit.Value())
	}
	return size
}

// podMemoryLimit is the memory limit of the pod's cgroup as kubelet sets it:
// the app containers' and sidecars' limits added up, at least the largest
// init container's, when every container has one; else 0 (none).
func podMemoryLimit(pod *corev1.Pod) int64 {
	var sum, initMax int64
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok || q.IsZero() {
			return 0
		}
		sum += q.Value()
	}
	for _, c := range pod.Spec.InitContainers {
		q, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok || q.IsZero() {
			return 0
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += q.Value()
		} else {
			initMax = max(initMax, q.Value())
		}
	}
	return max(sum, initMax)
}

// setUpMemoryEmptyDir mounts a tmpfs of size bytes (0: tmpfs's default) on
// an emptyDir's host directory, as kubelet's emptyDir plugin does for medium
// Memory, so that it works with any CRI runtime: the container bind-mounts a
// directory that is already RAM. A directory that is already a mount point (a
// second container of the pod, or a restarted jetlet) is left as it is. It
// needs CAP_SYS_ADMIN: cmd/jetlet has the validator reject medium Memory when
// not root.
func setUpMemoryEmptyDir(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	mounted, err := isMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	opts := "mode=0700" // setUpEmptyDir sets the volume's mode
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is on another device than its parent.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// tmpfsPluginDirs are the volume types that may be a tmpfs: emptyDirs of
// medium Memory, secret, downwardAPI and projected volumes.
var tmpfsPluginDirs = []string{emptyDirPluginDir, secretPluginDir, downwardAPIPluginDir, projectedPluginDir}

// tearDownVolumes unmounts the subPath binds of a pod (cleanSubPaths) and
// the tmpfs of every volume, before its data directory is removed (a
// removal through a mount would empty the volume and then fail on the busy
// mount point).
func (m *Kuberuntime) tearDownVolumes(uid string) error {
	if err := m.cleanSubPaths(uid); err != nil {
		return err
	}
	var errs []error
	for _, plugin := range tmpfsPluginDirs {
		root := filepath.Join(m.podDataDir(uid), "volumes", plugin)
		entries, err := os.ReadDir(root)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(root, e.Name())
			mounted, err := isMountPoint(dir)
			if err != nil || !mounted {
				continue
			}
			if err := unix.Unmount(dir, 0); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}
