package podcgroups

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Name is a cgroup's place in kubelet's tree, one component a level from the
// root (kubelet's CgroupName): {"kubepods", "burstable", "pod<uid>"}.
type Name []string

// The levels kubelet makes with --cgroups-per-qos.
var (
	kubepods   = Name{"kubepods"}
	burstable  = Name{"kubepods", "burstable"}
	besteffort = Name{"kubepods", "besteffort"}
)

// podPrefix starts the last component of a pod's cgroup.
const podPrefix = "pod"

// podName is the cgroup of pod uid of class qos: Guaranteed pods sit right
// under kubepods, the others under their QoS level.
func podName(qos corev1.PodQOSClass, uid string) Name {
	switch qos {
	case corev1.PodQOSBurstable:
		return Name{"kubepods", "burstable", podPrefix + uid}
	case corev1.PodQOSBestEffort:
		return Name{"kubepods", "besteffort", podPrefix + uid}
	default:
		return Name{"kubepods", podPrefix + uid}
	}
}

// Cgroupfs is the cgroupfs driver's path: /kubepods/burstable/pod<uid>.
func (n Name) Cgroupfs() string { return "/" + path.Join(n...) }

// Unit is the systemd driver's slice: each component with its - written
// _ (systemd reads - as a level), joined with -:
// kubepods-burstable-pod<uid with - as _>.slice. The root is -.slice.
func (n Name) Unit() string {
	if len(n) == 0 {
		return "-.slice"
	}
	parts := make([]string, len(n))
	for i, c := range n {
		parts[i] = strings.ReplaceAll(c, "-", "_")
	}
	return strings.Join(parts, "-") + ".slice"
}

// Systemd is the systemd driver's path of the slice in the cgroup
// filesystem, each level's slice a directory, as kubelet gives a sandbox's
// cgroup_parent: /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice.
func (n Name) Systemd() string {
	dirs := make([]string, len(n))
	for i := range n {
		dirs[i] = n[:i+1].Unit()
	}
	return "/" + path.Join(dirs...)
}

// Parent is the level above n.
func (n Name) Parent() Name { return n[:len(n)-1] }

// podUID is the uid of a pod's cgroup, false for another cgroup.
func (n Name) podUID() (string, bool) {
	if len(n) < 2 || n[0] != kubepods[0] || !strings.HasPrefix(n[len(n)-1], podPrefix) {
		return "", false
	}
	if len(n) == 3 && (n[1] != burstable[1] && n[1] != besteffort[1]) || len(n) > 3 {
		return "", false
	}
	return strings.TrimPrefix(n[len(n)-1], podPrefix), true
}

// unitName reads a slice's name back (Unit's inverse): false when unit is
// not a slice.
func unitName(unit string) (Name, bool) {
	base, ok := strings.CutSuffix(unit, ".slice")
	if !ok || base == "" || base == "-" {
		return nil, false
	}
	parts := strings.Split(base, "-")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "_", "-")
	}
	return Name(parts), true
}

// checkUID refuses a uid the driver could not name and read back: a slice's
// name writes - as _, so a uid with _ of its own (a UUID, kubelet's kind,
// has none) would be read back as another pod's.
func checkUID(d Driver, uid string) error {
	if uid == "" {
		return fmt.Errorf("pod cgroup: the pod has no uid")
	}
	if d == Systemd && strings.Contains(uid, "_") {
		return fmt.Errorf("pod cgroup: pod uid %q has an _, which the systemd cgroup driver's slice names cannot carry (they write - as _); use a uid without _ (a UUID)", uid)
	}
	if strings.ContainsAny(uid, "/.") {
		return fmt.Errorf("pod cgroup: pod uid %q is not a cgroup name", uid)
	}
	return nil
}
