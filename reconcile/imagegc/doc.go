// Package imagegc is kubelet's image manager (pkg/kubelet/images), its
// garbage collection half: ImageGCManager tracks each image the runtime
// holds (when it was first seen, when a container last used it), removes
// unused images least recently used first when the image file system is
// fuller than Policy.HighThresholdPercent (down to LowThresholdPercent),
// and those unused for longer than Policy.MaxAge whatever the usage; it
// frees every unused image for the eviction manager (DeleteUnusedImages)
// and lists the node's images for its status (NodeImages). An image a
// container uses (any container, running or not) or that the runtime pins
// (the sandbox image) is never removed, nor one younger than Policy.MinAge.
//
// It speaks the CRI's own types through the role it declares
// (ImageGCRuntime), with *runtime.Client's signatures.
package imagegc
