package client_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/jetlet/jetlet/test/jetlettest"
)

const webYAML = "../../../deploy/examples/web.yaml"

// cliRun is what one run of the jetlet binary printed.
type cliRun struct {
	stdout, stderr string
	code           int
}

// runBinary runs the jetlet binary with args, as cred's user when cred is set.
func runBinary(t *testing.T, bin string, cred *syscall.Credential, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cmd.Environ(), jetlettest.PodNetworkEnv(t, args)...)
	cmd.Dir = "/" // readable by any user
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	res := cliRun{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
	t.Logf("jetlet %s\n--- exit %d; stdout:\n%s--- stderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	return res
}

// wantRefused checks that a command failed with the message naming why.
func wantRefused(t *testing.T, res cliRun, why ...string) {
	t.Helper()
	if res.code == 0 {
		t.Errorf("exit 0, want a refusal")
	}
	for _, w := range why {
		if !strings.Contains(res.stderr, w) {
			t.Errorf("stderr %q does not say %q", res.stderr, w)
		}
	}
}

// writeSeed writes a new user nkey seed to path and returns path.
func writeSeed(t *testing.T, path string) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEmbeddedNATSAdmitsOnlyTheDataDirSeed(t *testing.T) {
	dataDir := t.TempDir()
	p := jetlettest.Start(t, "run", "--node", "n1", "--data-dir", dataDir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	p.WaitReady(60 * time.Second)
	url := p.NATSURL()
	seed := filepath.Join(dataDir, "nats-client.nk")
	if fi, err := os.Stat(seed); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", seed, fi.Mode().Perm())
	}
	bin := jetlettest.Binary(t)

	t.Run("no credentials", func(t *testing.T) {
		nc, err := nats.Connect(url)
		if err == nil {
			// Connected after all: show that it cannot publish an intent.
			_, pubErr := nc.Request("jetlet.intent.n1.u1", []byte("{}"), 5*time.Second)
			nc.Close()
			t.Fatalf("connected without credentials; publishing an intent: %v", pubErr)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("connect without credentials: %v, want an authorization violation", err)
		}
	})
	t.Run("another nkey", func(t *testing.T) {
		opt, err := nats.NkeyOptionFromSeed(writeSeed(t, filepath.Join(t.TempDir(), "other.nk")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nats.Connect(url, opt); !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("connect with another nkey: %v, want an authorization violation", err)
		}
	})
	t.Run("the seed", func(t *testing.T) {
		js := connect(t, url, p.NATSAuth())
		if _, err := js.Publish(t.Context(), "jetlet.dead.n1", []byte("x")); err != nil {
			t.Errorf("publish with the seed: %v", err)
		}
	})
	t.Run("CLI with the data dir", func(t *testing.T) {
		res := runBinary(t, bin, nil, "get", "nodes", "--nats-url", url, "--data-dir", dataDir)
		if res.code != 0 || !strings.Contains(res.stdout, "n1") {
			t.Errorf("get nodes with the data dir's seed: exit %d, stdout %q", res.code, res.stdout)
		}
	})
	t.Run("CLI with another data dir", func(t *testing.T) {
		other := t.TempDir()
		res := runBinary(t, bin, nil, "apply", "-f", mustAbs(t, webYAML), "--node", "n1", "--nats-url", url, "--data-dir", other)
		wantRefused(t, res, "NATS at "+url+" refused the connection (authorization violation)",
			"no seed at "+filepath.Join(other, "nats-client.nk"), "--data-dir, --nats-nkey")
	})
	t.Run("CLI with another jetlet's data dir", func(t *testing.T) {
		other := t.TempDir()
		wrong := writeSeed(t, filepath.Join(other, "nats-client.nk"))
		res := runBinary(t, bin, nil, "get", "pods", "--nats-url", url, "--data-dir", other)
		wantRefused(t, res, "NATS at "+url+" refused the credentials (authorization violation) of the seed "+wrong,
			"it is not a key that server admits")
	})
	t.Run("CLI with another nkey", func(t *testing.T) {
		wrong := writeSeed(t, filepath.Join(t.TempDir(), "other.nk"))
		res := runBinary(t, bin, nil, "get", "pods", "--nats-url", url, "--nats-nkey", wrong)
		wantRefused(t, res, "NATS at "+url+" refused the credentials (authorization violation)", "--nats-nkey")
	})
	t.Run("CLI as another user", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to run the CLI as another user")
		}
		nobody := nobodyCredential(t)
		bin := worldExecutable(t, bin)
		// The seed is the running user's alone.
		res := runBinary(t, bin, nobody, "get", "pods", "--nats-url", url, "--data-dir", dataDir)
		wantRefused(t, res, "cannot read the NATS seed "+seed+": permission denied")
		// Without it (the default ./jetlet-data of / has none), NATS refuses.
		res = runBinary(t, bin, nobody, "get", "pods", "--nats-url", url)
		wantRefused(t, res, "refused the connection (authorization violation)")
	})
}

func TestNATSInsecureAdmitsAnyoneWithAWarning(t *testing.T) {
	dataDir := t.TempDir()
	p := jetlettest.Start(t, "run", "--node", "n1", "--data-dir", dataDir, "--nats-insecure", "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	warning := p.WaitLog("--nats-insecure: the embedded NATS server admits anyone who reaches it, and anyone it admits can run processes on this node", 30*time.Second)
	if warning["level"] != "warn" {
		t.Errorf("the --nats-insecure line is logged at %v, want warn", warning["level"])
	}
	p.WaitReady(60 * time.Second)
	url := p.NATSURL()
	js := connect(t, url)
	if _, err := js.Publish(t.Context(), "jetlet.dead.n1", []byte("x")); err != nil {
		t.Errorf("publish without credentials: %v", err)
	}
	// The data dir's seed works either way, so the commands need no change.
	res := runBinary(t, jetlettest.Binary(t), nil, "get", "nodes", "--nats-url", url, "--data-dir", dataDir)
	if res.code != 0 {
		t.Errorf("get nodes with the data dir's seed: exit %d", res.code)
	}
}

func TestRunRefusesASeedOthersCanUse(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, seed string)
		want    string
	}{
		{"readable by others", func(t *testing.T, seed string) {
			if err := os.Chmod(seed, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "has mode 0644: others than its owner may use it"},
		{"owned by another user", func(t *testing.T, seed string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give the seed away")
			}
			nobody := nobodyCredential(t)
			if err := os.Chown(seed, int(nobody.Uid), int(nobody.Gid)); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := t.TempDir()
			seed := writeSeed(t, filepath.Join(dataDir, "nats-client.nk"))
			tt.prepare(t, seed)
			res := runBinary(t, jetlettest.Binary(t), nil, "run", "--node", "n1", "--data-dir", dataDir,
				"--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
			wantRefused(t, res, "seed "+seed+" "+tt.want)
		})
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// nobodyCredential is the credential of the user nobody.
func nobodyCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
}

// worldExecutable copies bin to a directory every user may enter: the
// build's own directory is private.
func worldExecutable(t *testing.T, bin string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jetlet-any")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "jetlet")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
