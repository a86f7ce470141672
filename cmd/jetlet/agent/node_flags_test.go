package agent

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/jetlet/jetlet/reconcile/admission"
)

// The node's flags parse as kubelet's; --allow-privileged is the privileged
// Pod Security level unless --pod-security names another, which is refused.
func TestNodeFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		wantLevel admission.Level
		wantErr   string
	}{
		{name: "defaults", wantLevel: admission.LevelBaseline},
		{name: "restricted", args: []string{"--pod-security", "restricted"}, wantLevel: admission.LevelRestricted},
		{name: "allow-privileged is privileged", args: []string{"--allow-privileged"}, wantLevel: admission.LevelPrivileged},
		{name: "both privileged", args: []string{"--allow-privileged", "--pod-security", "privileged"}, wantLevel: admission.LevelPrivileged},
		{name: "allow-privileged against baseline", args: []string{"--allow-privileged", "--pod-security", "baseline"}, wantErr: "--allow-privileged is --pod-security privileged"},
		{name: "unknown level", args: []string{"--pod-security", "lax"}, wantErr: `--pod-security: unknown Pod Security level "lax"`},
		{name: "max pods", args: []string{"--max-pods", "0"}, wantErr: "--max-pods 0"},
		{name: "reserved", args: []string{"--kube-reserved", "gpu=1"}, wantErr: "--kube-reserved"},
		{name: "labels", args: []string{"--node-labels", "kubernetes.io/role=x"}, wantErr: "--node-labels"},
		{name: "taints", args: []string{"--register-with-taints", "k=v"}, wantErr: "--register-with-taints"},
		{name: "eviction", args: []string{"--eviction-hard", "memory.available>1Gi"}, wantErr: "--eviction-*"},
		{name: "soft without grace", args: []string{"--eviction-soft", "memory.available<1Gi"}, wantErr: "--eviction-*"},
		{name: "image gc", args: []string{"--image-gc-low-threshold", "90"}, wantErr: "image-gc"},
		{name: "graceful shutdown", args: []string{"--shutdown-grace-period", "30s", "--shutdown-grace-period-critical-pods", "10s"}, wantLevel: admission.LevelBaseline},
		{name: "by priority", args: []string{"--shutdown-grace-period-by-pod-priority", "0=60s,2000000000=10s", "--shutdown-grace-period-by-pod-priority", "1000=20s"}, wantLevel: admission.LevelBaseline},
		{name: "critical above the whole", args: []string{"--shutdown-grace-period", "10s", "--shutdown-grace-period-critical-pods", "20s"}, wantErr: "--shutdown-grace-period-critical-pods 20s must be at most --shutdown-grace-period 10s"},
		{name: "both forms", args: []string{"--shutdown-grace-period", "10s", "--shutdown-grace-period-by-pod-priority", "0=10s"}, wantErr: "cannot be given with --shutdown-grace-period"},
		{name: "bad by priority", args: []string{"--shutdown-grace-period-by-pod-priority", "0:10s"}, wantErr: `--shutdown-grace-period-by-pod-priority "0:10s": want PRIORITY=DURATION`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n nodeFlags
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			allow := fs.Bool("allow-privileged", false, "")
			n.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := n.validate(*allow, fs.Changed("pod-security"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || n.level != tc.wantLevel {
				t.Fatalf("level %q, error %v; want %q", n.level, err, tc.wantLevel)
			}
		})
	}
}
