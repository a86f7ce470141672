package shim

import (
	"fmt"
	"os"
	"time"
)

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
