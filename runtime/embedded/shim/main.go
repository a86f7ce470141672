package shim

import (
	"fmt"
	"os"
	"time"
)

// OnePEnv, in the environment a shim process is started with, gives it
// one P: each mode mostly waits (a pod's supervisor, a container's init
// until it executes the command, the pause), and with a second P idle the
// runtime woke a thread at each yield: a third of a pod shim's CPU at a
// start went to it, in the sweep of dropColdCode's debug.FreeOSMemory
// (docs/pipeline.md). The environment, not runtime.GOMAXPROCS(1) at
// Main: a process that starts with two Ps keeps what the second one made
// (a pod shim's PSS 1.26 MiB against 1.12, in an A/B of the two).
const OnePEnv = "GOMAXPROCS=1"

const (
	// ModeEnv selects what a binary hosting the shim runs as: ModePod for a
	// pod shim, ModeInit for a container's init.
	ModeEnv  = "JETLET_PROC_SHIM"
	ModePod  = "pod"
	ModeInit = "init"
	// ModeProbe exits at once: the runtime starts it in each kind of
	// namespace to learn which the kernel grants.
	ModeProbe = "probe"
	// ModeHold waits until its stdin ends: the runtime starts it in a new
	// user namespace with a pod's mappings (and the pod's namespaces made in
	// it) and binds the namespaces' files, which keep them once it exits.
	ModeHold = "hold"
	// DirEnv names the sandbox directory (ModePod) or the container directory
	// (ModeInit).
	DirEnv = "JETLET_PROC_SHIM_DIR"
	// ReportFD is the pipe on which a starting pod shim tells the runtime it
	// serves (ExtraFiles[0]).
	ReportFD = 3
)

// Requested reports whether this process was started as a pod shim or a
// container's init. Every binary hosting the shim checks it first thing:
//
//	if shim.Requested() {
//		os.Exit(shim.Main())
//	}
func Requested() bool {
	m := os.Getenv(ModeEnv)
	return m == ModePod || m == ModeInit || m == ModeProbe || m == ModeHold || m == modePause || m == modePauseReap
}

// Main runs the mode ModeEnv names and returns the process's exit code.
func Main() int {
	dir := os.Getenv(DirEnv)
	var err error
	switch os.Getenv(ModeEnv) {
	case ModePod:
		err = runPod(dir, os.NewFile(ReportFD, "report"))
	case ModeInit:
		err = runInit(dir, os.NewFile(initSyncFD, "sync"))
	case ModeProbe:
	case ModeHold:
		err = hold()
	case modePause:
		err = runPause()
	case modePauseReap:
		err = runPauseReap()
	default:
		err = fmt.Errorf("%s=%q is not a shim mode", ModeEnv, os.Getenv(ModeEnv))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s jetlet-shim %s: %v\n", time.Now().Format(time.RFC3339Nano), dir, err)
		return 1
	}
	return 0
}
