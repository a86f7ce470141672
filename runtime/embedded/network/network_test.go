package network

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/poll"
)

// helperEnv makes the test binary a tiny TCP server or client (see TestMain),
// run inside a pod namespace through StartIn.
const helperEnv = "PODNET_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "listen":
		os.Exit(listenOnce())
	case "dial":
		os.Exit(dialOnce(os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// listenOnce listens on :8080, says "ready" on stdout, and greets one client.
func listenOnce() int {
	l, err := net.Listen("tcp4", ":8080")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	c, err := l.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(c, "hello from %s\n", c.LocalAddr())
	c.Close()
	return 0
}

// dialOnce prints what the server at addr says.
func dialOnce(addr string) int {
	c, err := net.DialTimeout("tcp4", addr, 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	_, _ = io.Copy(os.Stdout, c)
	return 0
}

func loadTestNetwork(t *testing.T, confDir string) *Network {
	t.Helper()
	n, err := Load(context.Background(), Config{ConfDir: confDir, BinDirs: []string{cnitest.PluginDir}, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestCreateRemoveLeavesNothingBehind(t *testing.T) {
	cnitest.Require(t)
	dir := filepath.Join(t.TempDir(), "netns")
	path, err := Create(dir, "pod1")
	if err != nil {
		t.Fatal(err)
	}
	if !IsNamespace(path) {
		t.Fatalf("%s is not a network namespace", path)
	}
	ns := inode(t, path)
	if ns == inode(t, "/proc/self/ns/net") {
		t.Fatal("the new namespace is this process's")
	}
	t.Cleanup(func() { _ = Remove(path) })
	// The thread that made it ends right after.
	left := ""
	poll.Until(t, 10*time.Second, func() string { return "no thread in the namespace; " + left + " is" }, func() bool {
		tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
		for _, task := range tasks {
			var st unix.Stat_t
			if unix.Stat(task, &st) == nil && st.Ino == ns {
				left = task
				return false
			}
		}
		return true
	})
	if got := mountsUnder(t, dir); len(got) != 2 {
		t.Fatalf("mounts under %s: %v, want the dir's own and the namespace's", dir, got)
	}
	if _, err := Create(dir, "pod1"); err == nil {
		t.Fatal("a second namespace of the same id was created")
	}

	for range 2 { // idempotent
		if err := Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if got := mountsUnder(t, dir); len(got) != 0 {
		t.Fatalf("mounts left under %s: %v", dir, got)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s still exists: %v", path, err)
	}
}

func TestTwoPodsGetDifferentIPsAndReachEachOther(t *testing.T) {
	cnitest.Require(t)
	tn := cnitest.Network(t)
	n := loadTestNetwork(t, tn.ConfDir)
	if n.Name() != cnitest.NetworkName {
		t.Fatalf("network %q, want %s", n.Name(), cnitest.NetworkName)
	}
	nsDir := filepath.Join(t.TempDir(), "netns")
	ctx := context.Background()

	pods := make([]Pod, 2)
	ips := make([]string, 2)
	for i := range pods {
		id := fmt.Sprintf("sandbox%d", i)
		path, err := Create(nsDir, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = Remove(path) })
		pods[i] = Pod{SandboxID: id, Namespace: "default", Name: id, UID: "uid-" + id, NetNS: path}
		got, err := n.Add(ctx, pods[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], tn.Prefix) {
			t.Fatalf("pod %d got IPs %v, want one in %s0/24", i, got, tn.Prefix)
		}
		ips[i] = got[0]
	}
	if ips[0] == ips[1] {
		t.Fatalf("both pods got %s", ips[0])
	}
	for _, ip := range ips {
		if !tn.Reserved(ip) {
			t.Fatalf("host-local holds no reservation of %s", ip)
		}
	}

	serve(t, pods[0].NetNS)
	if got, want := dial(t, pods[1].NetNS, ips[0]+":8080"), "hello from "+ips[0]+":8080\n"; got != want {
		t.Fatalf("client in pod 1 got %q, want %q", got, want)
	}

	// DEL frees the address, again and again, and after the namespace is gone.
	if err := n.Del(ctx, pods[0]); err != nil {
		t.Fatal(err)
	}
	if tn.Reserved(ips[0]) {
		t.Fatalf("%s still reserved after DEL", ips[0])
	}
	if err := n.Del(ctx, pods[0]); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
	if err := Remove(pods[1].NetNS); err != nil {
		t.Fatal(err)
	}
	if err := n.Del(ctx, pods[1]); err != nil {
		t.Fatalf("DEL after the namespace is gone: %v", err)
	}
	if tn.Reserved(ips[1]) {
		t.Fatalf("%s still reserved after DEL", ips[1])
	}
}

// serve starts the helper's server in the network namespace at nsPath and
// waits until it listens on :8080; it greets one client.
func serve(t *testing.T, nsPath string) {
	t.Helper()
	server := exec.Command(os.Args[0])
	server.Env = append(os.Environ(), helperEnv+"=listen")
	server.Stderr = os.Stderr
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := StartIn(server, Namespace{Path: nsPath, Type: unix.CLONE_NEWNET}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("server said %q, %v", line, err)
	}
	// The server runs in the pod's namespace, not in ours.
	if inode(t, fmt.Sprintf("/proc/%d/ns/net", server.Process.Pid)) != inode(t, nsPath) {
		t.Fatal("the server does not run in the pod's namespace")
	}
}

// dial is what the server at addr says to a client in the network
// namespace at nsPath.
func dial(t *testing.T, nsPath, addr string) string {
	t.Helper()
	client := exec.Command(os.Args[0], addr)
	client.Env = append(os.Environ(), helperEnv+"=dial")
	var got strings.Builder
	client.Stdout = &got
	client.Stderr = os.Stderr
	if err := StartIn(client, Namespace{Path: nsPath, Type: unix.CLONE_NEWNET}); err != nil {
		t.Fatal(err)
	}
	if err := client.Wait(); err != nil {
		t.Fatalf("client to %s: %v", addr, err)
	}
	return got.String()
}

func TestLoad(t *testing.T) {
	cnitest.Require(t)
	write := func(dir, name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	load := func(dir string) (*Network, error) {
		return Load(context.Background(), Config{ConfDir: dir, BinDirs: []string{cnitest.PluginDir}, CacheDir: t.TempDir()})
	}

	empty := t.TempDir()
	if _, err := load(empty); err == nil || !strings.Contains(err.Error(), "no network config") {
		t.Fatalf("empty dir: %v", err)
	}

	// The first usable file in lexical order; a .conf is a one-plugin list.
	dir := t.TempDir()
	write(dir, "05-broken.conflist", `{"name": "broken"`)
	write(dir, "10-one.conf", `{"cniVersion": "1.0.0", "name": "one", "type": "bridge", "ipam": {"type": "host-local", "subnet": "10.88.1.0/24"}}`)
	write(dir, "20-two.conflist", `{"cniVersion": "1.0.0", "name": "two", "plugins": [{"type": "bridge"}]}`)
	n, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name() != "one" || n.File() != filepath.Join(dir, "10-one.conf") || len(n.Skipped()) != 1 {
		t.Fatalf("loaded %q from %s, skipped %v", n.Name(), n.File(), n.Skipped())
	}

	missing := t.TempDir()
	write(missing, "10-x.conflist", `{"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": "no-such-plugin"}]}`)
	if _, err := load(missing); err == nil || !strings.Contains(err.Error(), "no-such-plugin") {
		t.Fatalf("missing plugin: %v", err)
	}
}

// BenchmarkCreateRemove is the namespace's share of a pod start (the rest of
// RunPodSandbox's CNI cost is the plugins: BenchmarkRunPodSandboxCNI in
// runtime/embedded).
func BenchmarkCreateRemove(b *testing.B) {
	cnitest.Require(b)
	dir := filepath.Join(b.TempDir(), "netns")
	i := 0
	for b.Loop() {
		path, err := Create(dir, fmt.Sprint(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := Remove(path); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// A pod without a hostPort is attached without portmap, which would have
// nothing to do; a config without portmap is used as it is.
func TestWithoutPortmap(t *testing.T) {
	with, err := libcni.ConfListFromBytes([]byte(`{"cniVersion": "1.0.0", "name": "n", "plugins": [
  {"type": "bridge", "bridge": "b0", "ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := withoutPortmap(with)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "n" || got.CNIVersion != "1.0.0" || len(got.Plugins) != 1 || got.Plugins[0].Network.Type != "bridge" ||
		!strings.Contains(string(got.Plugins[0].Bytes), `"subnet":"10.1.0.0/24"`) {
		t.Fatalf("without portmap: %s", got.Bytes)
	}
	if again, err := withoutPortmap(got); err != nil || again != got {
		t.Fatalf("a list without portmap: %v, %v", again, err)
	}
}
