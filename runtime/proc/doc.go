// Package proc is jetlet's embedded CRI runtime: a Kubernetes CRI v1 server
// (RuntimeService and ImageService) on a unix socket that runs each container as
// a supervised host process, the idea of Kuscia's "runp".
//
// There are no images, no root filesystems and no namespaces: a sandbox is a
// directory with a persisted record, a container is the config's command and
// args started on the host with the config's environment, supervised by a small
// per-container shim process. The shim is the hosting binary re-executed with
// JETLET_PROC_SHIM=1 (see ShimRequested and ShimMain); it runs in its own
// session, starts the container in its own process group, copies the output to
// the CRI log file, waits for the container and records its exit atomically.
// Because the shim, not the runtime, is the container's parent, containers
// outlive a restart of the runtime and no exit is lost.
//
// Layout follows containerd's CRI server: one file per RPC named
// resource_verb.go with its test beside it.
//
// State under Config.Dir:
//
//	images.json                   pulled image references
//	sandboxes/<id>/sandbox.json   sandbox record (config, state, times)
//	containers/<id>/container.json  container record (config, sandbox, log path)
//	containers/<id>/spec.json     what the shim runs (command, env, dir, log)
//	containers/<id>/shim.lock     flock held by the shim for its whole life
//	containers/<id>/shim.json     written by the shim once the process runs
//	containers/<id>/exit.json     written by the shim when the process exits
//	containers/<id>/shim.log      the shim's own stderr
//	containers/<id>/rootfs/       default working dir; mounts linked inside
//
// Every record is written to a temporary file and renamed into place.
package proc
