// Package podcgroups makes kubelet's pod cgroups for a CRI runtime (kubelet's
// pkg/kubelet/cm with --cgroups-per-qos): kubepods with the node's
// allocatable, its QoS levels burstable and besteffort, and a cgroup per pod
// with the pod's resources, under which the runtime puts the pod's sandbox
// and containers (the sandbox's cgroup_parent, Parent). The systemd driver
// makes them as slices through systemd's D-Bus API, the cgroupfs driver in
// the cgroup filesystem, on cgroup v1 and v2.
//
// It is a node-level manager between reconcile, which asks for a pod's
// cgroup through a role it declares, and the host: it does I/O and dials
// systemd, so it is not reconcile's; and it is not the CRI client's
// (runtime/), which knows no pods. cmd/jetlet/agent wires it.
package podcgroups

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/admission"
)

// Driver is how cgroups are made, the CRI runtime's cgroup driver.
type Driver string

const (
	Cgroupfs Driver = "cgroupfs"
	Systemd  Driver = "systemd"
)

// ParseDriver reads kubelet's --cgroup-driver.
func ParseDriver(s string) (Driver, error) {
	switch d := Driver(s); d {
	case Cgroupfs, Systemd:
		return d, nil
	}
	return "", fmt.Errorf("cgroup driver %q: want cgroupfs or systemd", s)
}

// defaultCPUPeriod is the CFS period of pods' quotas, µs (kubelet's
// --cpu-cfs-quota-period default).
const defaultCPUPeriod = 100000

// Config configures a Manager. Driver is required.
type Config struct {
	Driver Driver
	// PodPidsLimit is each pod cgroup's pids.max (kubelet's --pod-max-pids);
	// 0 or -1: none.
	PodPidsLimit int64
	// Allocatable limits kubepods: the node's capacity less what is
	// reserved (kubelet's --enforce-node-allocatable=pods).
	Allocatable corev1.ResourceList
}

// backend makes cgroups with one driver.
type backend interface {
	// ensure creates the cgroup n with res, or applies res to it.
	ensure(ctx context.Context, n Name, res Resources) error
	// remove removes the cgroup n; one already gone is no error.
	remove(ctx context.Context, n Name) error
	// pods lists the pods' cgroups there are.
	pods(ctx context.Context) ([]Name, error)
	close()
}

// Manager is the node's pod cgroups (kubelet's QoS container manager and pod
// container manager together). Safe for concurrent use.
type Manager struct {
	cfg Config
	b   backend // set by Start, read-only after

	// mu guards pods and orders the writes of the burstable level's shares.
	mu sync.Mutex
	// pods are those whose cgroup this process made or updated, with what
	// it applied: Ensure of the same is a no-op, and the Burstable ones'
	// requests are the burstable level's shares.
	pods map[string]ensured
}

type ensured struct {
	qos      corev1.PodQOSClass
	cpuMilli int64
	res      Resources
}

// New checks cfg; Start makes the cgroups.
func New(cfg Config) (*Manager, error) {
	if _, err := ParseDriver(string(cfg.Driver)); err != nil {
		return nil, err
	}
	if cfg.PodPidsLimit < -1 {
		return nil, fmt.Errorf("pod pids limit %d: want -1 (no limit) or more", cfg.PodPidsLimit)
	}
	return &Manager{cfg: cfg, pods: map[string]ensured{}}, nil
}

// Start connects the driver (systemd's D-Bus, or the host's hierarchy) and
// makes kubepods and the QoS levels, as kubelet's container manager at its
// start.
func (m *Manager) Start(ctx context.Context) error {
	var err error
	switch m.cfg.Driver {
	case Systemd:
		m.b, err = dialSystemd(ctx)
	default:
		m.b, err = newCgroupfs()
	}
	if err != nil {
		return err
	}
	if err := m.b.ensure(ctx, kubepods, kubepodsResources(m.cfg.Allocatable)); err != nil {
		return err
	}
	minimum := uint64(minShares)
	if err := m.b.ensure(ctx, besteffort, Resources{CPUShares: &minimum}); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.updateBurstable(ctx)
}

// Close lets go of the driver's connection.
func (m *Manager) Close() {
	if m.b != nil {
		m.b.close()
	}
}

// name is pod's cgroup.
func (m *Manager) name(pod *corev1.Pod) Name {
	return podName(admission.PodQOS(pod), string(pod.UID))
}

// Parent is the cgroup_parent of pod's sandbox, what kubelet sends: the
// driver's path of the pod's cgroup (the systemd driver's a path of slices;
// containerd takes its last, and puts each container in a scope of it).
func (m *Manager) Parent(pod *corev1.Pod) string {
	if m.cfg.Driver == Systemd {
		return m.name(pod).Systemd()
	}
	return m.name(pod).Cgroupfs()
}

// Ensure makes pod's cgroup with its resources (kubelet's
// EnsureExists, after its QoS level's update), or applies changed
// resources; the same again does nothing.
func (m *Manager) Ensure(ctx context.Context, pod *corev1.Pod) error {
	uid := string(pod.UID)
	if err := checkUID(m.cfg.Driver, uid); err != nil {
		return err
	}
	qos := admission.PodQOS(pod)
	res := podResources(pod, qos, defaultCPUPeriod)
	if m.cfg.PodPidsLimit > 0 {
		res.PidsLimit = &m.cfg.PodPidsLimit
	}
	want := ensured{qos: qos, cpuMilli: cpuRequestMilli(pod), res: res}
	m.mu.Lock()
	had, ok := m.pods[uid]
	if ok && reflect.DeepEqual(had, want) {
		m.mu.Unlock()
		return nil
	}
	m.pods[uid] = want
	err := m.updateBurstable(ctx)
	m.mu.Unlock()
	if err == nil {
		err = m.b.ensure(ctx, podName(qos, uid), res)
	}
	if err != nil {
		m.forget(uid, had, ok)
		return fmt.Errorf("pod cgroup of %s: %w", uid, err)
	}
	return nil
}

// forget puts back what was known of uid before a failed Ensure, so that
// the next one tries again.
func (m *Manager) forget(uid string, had ensured, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.pods[uid] = had
	} else {
		delete(m.pods, uid)
	}
}

// updateBurstable gives the burstable level the shares of its pods'
// requests (kubelet's setCPUCgroupConfig). mu is held.
func (m *Manager) updateBurstable(ctx context.Context) error {
	var milli int64
	for _, p := range m.pods {
		if p.qos == corev1.PodQOSBurstable {
			milli += p.cpuMilli
		}
	}
	shares := milliCPUToShares(milli)
	return m.b.ensure(ctx, burstable, Resources{CPUShares: &shares})
}

// RemoveGone removes the cgroups of the pods gone says are gone and hold
// nothing of the runtime's (kubelet's cleanupOrphanedPodCgroups): at each
// garbage collection, so also those of pods that went while jetlet was down.
func (m *Manager) RemoveGone(ctx context.Context, gone func(uid string) bool) error {
	names, err := m.b.pods(ctx)
	if err != nil {
		return fmt.Errorf("list pod cgroups: %w", err)
	}
	var errs []error
	removed := false
	for _, n := range names {
		uid, _ := n.podUID()
		if !gone(uid) {
			continue
		}
		if err := m.b.remove(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		m.mu.Lock()
		delete(m.pods, uid)
		m.mu.Unlock()
		removed = true
	}
	if removed {
		m.mu.Lock()
		errs = append(errs, m.updateBurstable(ctx))
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}
