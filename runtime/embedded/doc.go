// Package embedded is jetlet's embedded container runtime ("jetlet-proc"): a
// Kubernetes CRI v1 server (RuntimeService and ImageService) on a unix socket,
// the idea of Kuscia's "runp", for hosts with no containerd. The CRI client,
// crictl and critest use it as they use containerd.
//
// Each pod sandbox is one small supervisor process, the pod shim (package
// shim, built as cmd/jetlet-shim, started with JETLET_PROC_SHIM=pod), that
// the runtime starts in the pod's new UTS, IPC, PID and mount namespaces (and
// network namespace, package network). The shim starts each container as its
// child in a mount namespace of its own whose root the container's init builds
// (its image: an overlay of the image's unpacked layers, package images; its
// own /proc, /dev and volumes), in its cgroups (package cgroups:
// limits, devices) and under its seccomp filter (package seccomp), then copies
// its output to the CRI log and records its exit. Because the shim, not the
// runtime, is the containers' parent, pods outlive a restart of the runtime
// (and of jetlet), and no exit is lost. Without root there are no namespaces,
// cgroups or users: containers are host processes (isolation "none").
//
// Containers run OCI images: pulled through the registry API or imported from
// an archive, each layer unpacked once into the store under Config.Dir/images
// (package images), references normalised as containerd does
// (schemas/imageref). Only a runtime that is not root, or one asked for it
// (Config.HostPrograms), runs host programs instead: an image's reference
// then names the program.
//
// Files follow containerd's CRI server: one per RPC, resource_verb.go, with
// its test beside it.
//
// State under Config.Dir (mode 0700):
//
//	images.json                       the references of host programs pulled (Config.HostPrograms)
//	images/                           the image store: blobs, unpacked layers, records (package images)
//	sandboxes/<id>/sandbox.json       sandbox record (config, state, times, cgroup, netns)
//	sandboxes/<id>/shim.lock          flock held by the pod shim for its life (its pid inside)
//	sandboxes/<id>/shim.sock          the pod shim's socket: start, exec, attach, reopen
//	sandboxes/<id>/shm, resolv.conf, hostname   the pod's /dev/shm and files
//	containers/<id>/container.json    container record (config, sandbox, log path, seccomp)
//	containers/<id>/spec.json         what the shim runs (argv, env, user, mounts, isolation)
//	containers/<id>/shim.lock         flock held while the container runs
//	containers/<id>/shim.json         written by the shim once the command runs
//	containers/<id>/exit.json         written by the shim when the command exits
//	netns/, cni/                      pods' network namespaces, the CNI cache
//	cni/net.d/, cni/networks/         the node-local pod network's config and addresses
//
// Every record is written to a temporary file and renamed into place.
package embedded
