package eviction

import (
	"context"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Observer measures the node for the manager; NodeObserver is the real one.
// The manager calls it from its own goroutine only.
type Observer interface {
	// Observe measures the node's signals now. A signal it cannot measure
	// (no image file system reported, say) is absent, and its thresholds
	// are not evaluated.
	Observe(ctx context.Context) (Observations, error)
	// PodUsage measures what each pod the runtime runs uses, by pod UID. It
	// costs more than Observe (it walks pods' volumes and logs), so the
	// manager asks only when it must rank pods.
	PodUsage(ctx context.Context) (map[string]PodUsage, error)
}

// Observation is one signal as observed.
type Observation struct {
	Available resource.Quantity
	// Capacity is what a percentage threshold is a percentage of.
	Capacity resource.Quantity
}

// Observations are the node's signals at one moment.
type Observations struct {
	Signals map[Signal]Observation
	// DedicatedImageFs says the runtime keeps images and writable layers on
	// another file system than nodefs's, which changes what is reclaimed and
	// how pods are ranked for each (kubelet's HasDedicatedImageFs).
	DedicatedImageFs bool
	// SplitContainerFs says the runtime keeps containers' writable layers on
	// another file system than its images (KEP-4191's split image file
	// system; kubelet's HasDedicatedContainerFs): containerfs is observed on
	// it.
	SplitContainerFs bool
}

// PodUsage is what one pod uses.
type PodUsage struct {
	// MemoryWorkingSet is the pod's working set in bytes (its cgroup's, or
	// its containers' added up).
	MemoryWorkingSet int64
	// Processes is the number of processes in the pod.
	Processes int64
	// Containers are its running containers.
	Containers []ContainerUsage
	// Volumes is what its local ephemeral volumes (emptyDirs on disk) use.
	Volumes DiskUsage
}

// ContainerUsage is what one container uses; a nil field was not measured.
type ContainerUsage struct {
	Name             string
	MemoryWorkingSet *int64
	// WritableLayer is its root file system's own part (the runtime's
	// ContainerStats.WritableLayer).
	WritableLayer *DiskUsage
	Logs          *DiskUsage
}

// DiskUsage is bytes and inodes used on a file system.
type DiskUsage struct {
	Bytes  int64
	Inodes int64
}

func (d *DiskUsage) add(o DiskUsage) {
	d.Bytes += o.Bytes
	d.Inodes += o.Inodes
}
