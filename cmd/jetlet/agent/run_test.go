package agent

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

func TestPodMaxPidsFlag(t *testing.T) {
	t.Setenv("JETLET_POD_MAX_PIDS", "1024")
	cmd := NewRunCommand()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if err := cli.BindEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("pod-max-pids").Value.String(); got != "1024" {
		t.Errorf("--pod-max-pids from JETLET_POD_MAX_PIDS = %s", got)
	}

	// Refused by validation, before jetlet starts anything.
	cmd = NewRunCommand()
	cmd.SetArgs([]string{"--node", "n", "--data-dir", t.TempDir(), "--pod-max-pids", "-2"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--pod-max-pids -2") {
		t.Fatalf("--pod-max-pids -2: %v, want refused", err)
	}
}

func TestEventedRelistPeriodShorterThanRelistPeriodIsRefused(t *testing.T) {
	cmd := NewRunCommand()
	cmd.SetArgs([]string{"--node", "n", "--data-dir", t.TempDir(), "--relist-period", "2s", "--evented-relist-period", "1s"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	want := "--evented-relist-period 1s: must be 0 or at least --relist-period (2s)"
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("--evented-relist-period below --relist-period: %v, want %q", err, want)
	}
}

func TestImageRegistryListenIsLoopbackOnly(t *testing.T) {
	t.Setenv("JETLET_IMAGE_REGISTRY_LISTEN", "0.0.0.0:5050")
	cmd := NewRunCommand()
	cmd.SetArgs([]string{"--node", "n", "--data-dir", t.TempDir()})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error { return cli.BindEnv(cmd) }
	want := `--image-registry-listen "0.0.0.0:5050": not a loopback address`
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("JETLET_IMAGE_REGISTRY_LISTEN=0.0.0.0:5050: %v, want %q", err, want)
	}
}

func TestImageStoreDirIsTheEmbeddedRuntimes(t *testing.T) {
	cmd := NewRunCommand()
	cmd.SetArgs([]string{"--node", "n", "--data-dir", t.TempDir(), "--runtime-endpoint", "unix:///run/containerd/containerd.sock", "--image-store-dir", t.TempDir()})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	want := "--image-store-dir places the embedded runtime's images; with --runtime-endpoint that runtime's own config applies"
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("--image-store-dir with --runtime-endpoint: %v, want %q", err, want)
	}
}

// A policy kubelet does not have, an allowlist without its policy, and a
// pattern kubelet refuses stop jetlet run before it starts anything.
func TestImagePullCredentialsVerificationFlagsAreChecked(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-pull-credentials-verification-policy", "Sometimes"}, `unknown image pull credentials verification policy "Sometimes"`},
		{[]string{"--preloaded-images-verification-allowlist", "registry.example/team/app"}, "an allowlist is for policy NeverVerifyAllowlistedImages only, not NeverVerifyPreloadedImages"},
		{[]string{"--image-pull-credentials-verification-policy", "NeverVerifyAllowlistedImages", "--preloaded-images-verification-allowlist", "busybox:1.36"},
			`allowlist pattern "busybox:1.36": give the image's full name without tag or digest (docker.io/library/busybox)`},
	} {
		cmd := NewRunCommand()
		cmd.SetArgs(append([]string{"--node", "n", "--data-dir", t.TempDir()}, tt.args...))
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}
