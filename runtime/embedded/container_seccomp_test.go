package embedded

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// withSeccomp sets the container's seccomp profile, its added capabilities
// and privilege.
func withSeccomp(p *runtimeapi.SecurityProfile, privileged bool, add ...string) func(*runtimeapi.ContainerConfig) {
	return func(c *runtimeapi.ContainerConfig) {
		c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			Seccomp: p, Privileged: privileged, Capabilities: &runtimeapi.Capability{AddCapabilities: add},
		}}
	}
}

// localhostProfile writes an OCI seccomp profile and returns it as the CRI
// names it.
func localhostProfile(t *testing.T, json string) *runtimeapi.SecurityProfile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(path, []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: path}
}

var runtimeDefault = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}

func TestSeccompRuntimeDefault(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	sb, sbCfg := h.pod("p", nil)
	// A user namespace needs no capability: only the profile refuses it.
	const script = "grep Seccomp: /proc/self/status; unshare --user true 2>&1 && echo unshared"
	if got, want := h.outputWith(sb, sbCfg, "unconfined", script, nil), "Seccomp:\t0\nunshared"; got != want {
		t.Fatalf("without a profile:\n%s\nwant:\n%s", got, want)
	}
	got := h.outputWith(sb, sbCfg, "default", script, withSeccomp(runtimeDefault, false))
	if want := "Seccomp:\t2\nunshare: unshare(0x10000000): Operation not permitted"; got != want {
		t.Fatalf("RuntimeDefault:\n%s\nwant:\n%s", got, want)
	}

	// Execs get the container's filter; a restart keeps what create compiled.
	cfg := containerConfig("running", nil, "sleep", "1000")
	withSeccomp(runtimeDefault, false)(cfg)
	id := h.create(sb, sbCfg, cfg)
	h.restart()
	h.startC(id)
	resp, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"grep", "Seccomp:", "/proc/self/status"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.GetStdout()); got != "Seccomp:\t2\n" {
		t.Fatalf("exec: %q", got)
	}
}

func TestSeccompLocalhostProfile(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	sb, sbCfg := h.podWith("p", func(c *runtimeapi.PodSandboxConfig) { c.Hostname = "podhost" })

	noMkdir := localhostProfile(t, `{"defaultAction": "SCMP_ACT_ALLOW",
		"syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}`)
	got := h.outputWith(sb, sbCfg, "nomkdir", "mkdir /tmp/d 2>&1; touch /tmp/f && echo touched", withSeccomp(noMkdir, false))
	if want := "mkdir: can't create directory '/tmp/d': Operation not permitted\ntouched"; got != want {
		t.Fatalf("a profile denying mkdir:\n%s\nwant:\n%s", got, want)
	}

	// critest's case: CAP_SYS_ADMIN allows sethostname, the profile denies
	// it; a privileged container has no profile (as with containerd).
	noHostname := localhostProfile(t, `{"defaultAction": "SCMP_ACT_ALLOW",
		"syscalls": [{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO"}]}`)
	const script = "hostname changed 2>/dev/null || echo refused; hostname"
	if got := h.outputWith(sb, sbCfg, "nohostname", script, withSeccomp(noHostname, false, "SYS_ADMIN")); got != "refused\npodhost" {
		t.Fatalf("a profile denying sethostname, with CAP_SYS_ADMIN: %q", got)
	}
	if got := h.outputWith(sb, sbCfg, "privileged", script, withSeccomp(noHostname, true)); got != "changed" {
		t.Fatalf("privileged: %q", got)
	}
}

func TestSeccompBadProfilesAreRefused(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	missing := filepath.Join(t.TempDir(), "missing.json")
	for _, tc := range []struct {
		name    string
		profile *runtimeapi.SecurityProfile
		want    string
	}{
		{"missing file", &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: missing},
			`cannot load seccomp profile "` + missing + `"`},
		{"not JSON", localhostProfile(t, "{"), "decoding seccomp profile"},
		{"no default action", localhostProfile(t, `{"syscalls": []}`), "defaultAction: no action"},
		{"a reference without Localhost", &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault, LocalhostRef: "/x"},
			"localhost_ref must only be set with the Localhost profile type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := containerConfig(strings.ReplaceAll(tc.name, " ", "-"), nil, "true")
			withSeccomp(tc.profile, false)(cfg)
			_, err := h.tryCreate(sb, sbCfg, cfg)
			wantCode(t, err, codes.InvalidArgument)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("the sandbox's", func(t *testing.T) {
		cfg := podConfig("bad", nil)
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: missing},
		}}
		_, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
		wantCode(t, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), missing) {
			t.Fatalf("error %v does not name %s", err, missing)
		}
	})
}
