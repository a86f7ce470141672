package embedded

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// Isolation levels, as RuntimeStatus and the node record report them.
const (
	IsolationFull    = "full"    // every namespace a pod asks for
	IsolationPartial = "partial" // some namespaces refused by the kernel
	IsolationNone    = "none"    // not root: pods are host processes
)

// podNamespaces are the namespaces a pod shim may be started in, by name.
var podNamespaces = []struct {
	name string
	flag uintptr
}{
	{"uts", syscall.CLONE_NEWUTS},
	{"ipc", syscall.CLONE_NEWIPC},
	{"pid", syscall.CLONE_NEWPID},
	{"mnt", syscall.CLONE_NEWNS},
}

// isolation is what this host lets the runtime give pods, found once at
// Start.
type isolation struct {
	level   string
	allowed uintptr  // the namespace flags the kernel grants
	missing []string // what is not applied, for the log and RuntimeStatus
	// nsenter is the nsenter binary execs enter their container's mount
	// namespace with (shim.Isolation.Nsenter); empty when not found.
	nsenter string
}

// detectIsolation starts the shim binary in each namespace kind to see which
// the kernel grants this process.
func detectIsolation(shimPath string) isolation {
	if os.Geteuid() != 0 {
		return isolation{level: IsolationNone, missing: []string{"not running as root: no namespaces, users or mounts"}}
	}
	iso := isolation{level: IsolationFull}
	for _, ns := range podNamespaces {
		if err := probeNamespace(shimPath, ns.flag); err != nil {
			iso.missing = append(iso.missing, ns.name+" namespace: "+err.Error())
			continue
		}
		iso.allowed |= ns.flag
	}
	if iso.allowed&syscall.CLONE_NEWNS != 0 {
		var err error
		if iso.nsenter, err = findNsenter(); err != nil {
			iso.missing = append(iso.missing, "nsenter (util-linux) not found: an exec enters its container's root, not its mount namespace")
		}
	}
	if len(iso.missing) > 0 {
		iso.level = IsolationPartial
	}
	return iso
}

// findNsenter looks for nsenter on the PATH, then where distributions put
// it (a service's PATH may lack the sbin directories).
func findNsenter() (string, error) {
	if p, err := exec.LookPath("nsenter"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/nsenter", "/usr/sbin/nsenter", "/bin/nsenter", "/sbin/nsenter"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("nsenter not found")
}

func probeNamespace(shimPath string, flag uintptr) error {
	cmd := exec.Command(shimPath)
	cmd.Env = []string{shim.ModeEnv + "=" + shim.ModeProbe}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flag}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return errors.New(msg)
		}
		return err
	}
	return nil
}

// isolated reports whether containers get a mount namespace of their own,
// set up by their init as root (else they run in the host's view as
// jetlet's user).
func (r *Runtime) isolated() bool { return r.iso.allowed&syscall.CLONE_NEWNS != 0 }

// Isolation reports how far pods are isolated from the host (IsolationFull,
// IsolationPartial or IsolationNone) and what is missing. Valid after Start.
func (r *Runtime) Isolation() (level string, missing []string) {
	return r.iso.level, r.iso.missing
}
