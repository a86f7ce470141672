// Package images is the embedded CRI runtime's image store: daemonless and
// content addressed, as containerd's CRI image service with the overlayfs
// snapshotter. Images come from registries (Store.Pull, through
// go-containerregistry's remote package) or from archives (Store.Import of
// an OCI image layout or a `docker save` tar); each layer is unpacked once,
// by diff id, into a directory in overlayfs lower-dir format, and a
// container's root file system is an overlay of its image's LayerDirs,
// mounted by the caller.
//
// Records (images.json) are written atomically; a layer directory appears
// whole or not at all. Containers Hold their image so that its layers
// outlive a Remove until Release.
//
// Locking: a Store's configuration is set by Open and only read after;
// its records, holds and pending layers are guarded by Store.mu, which is
// never held while a layer is fetched or unpacked. Concurrent pulls of one
// reference, and concurrent unpacks of one layer, are each one call
// (flightGroup).
package images
