// Package kubetest starts a real Kubernetes control plane for a test:
// etcd, kube-apiserver, kube-scheduler and kube-controller-manager from
// k8s.io/kubernetes, built from test/kube/controlplane (a module of its own)
// once per machine, and kubectl from the same build. docs/testing.md, "The
// test control plane", says how it is built, cached and started.
package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/leftovers"
	"github.com/jetlet/jetlet/test/poll"
)

// dirEnv marks the control plane's processes with its dir, for
// test/leftovers to find one that outlived its test.
const dirEnv = "JETLET_KUBETEST_DIR"

const (
	// readyTimeout bounds the start, from the processes' start to a
	// default service account: about 10 s warm on a loaded 2-core machine.
	readyTimeout = 3 * time.Minute
	// stopTimeout bounds up's stop (it gives each component 15 s).
	stopTimeout = 30 * time.Second
)

// binary is test/kube/controlplane's command: the control plane's
// components and kubectl, one binary.
var binary = &gobuild.Command{
	Pkg:    ".",
	Name:   "kube-controlplane",
	Module: moduleDir("controlplane"),
	Flags:  []string{"-ldflags=-s -w"},
	Cached: true,
}

// metricsServer is test/kube/metricsserver's command: metrics-server, built
// against the Kubernetes libraries of its own release.
var metricsServer = &gobuild.Command{
	Pkg:    ".",
	Name:   "kube-metrics-server",
	Module: moduleDir("metricsserver"),
	Flags:  []string{"-ldflags=-s -w"},
	Cached: true,
}

func moduleDir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "kube", name)
}

// Binary returns the control plane's binary, built on first use.
func Binary(t testing.TB) string {
	t.Helper()
	return binary.Path(t)
}

// ControlPlane is a running control plane, stopped at the end of the test
// that started it.
type ControlPlane struct {
	Dir        string       // its state, certs and logs (Dir/logs)
	Kubeconfig string       // the admin's (system:masters)
	Config     *rest.Config // from Kubeconfig
	Client     kubernetes.Interface
	bin        string
}

// Option is an addition to a control plane that Start starts.
type Option func(t testing.TB, upArgs []string) []string

// WithMetricsServer adds metrics-server behind kube-apiserver's
// aggregation layer, which kubectl top reads: it scrapes each Node's
// kubelet API (/metrics/resource, at the Node's InternalIP and its
// status's port) every 10 s.
func WithMetricsServer(t testing.TB, upArgs []string) []string {
	return append(upArgs, "--metrics-server", metricsServer.Path(t))
}

// Start starts a control plane in a temp dir and returns it once
// kube-apiserver's /readyz is ok and the default namespace and its default
// service account exist (kube-controller-manager made it). It has no nodes.
func Start(t testing.TB, options ...Option) *ControlPlane {
	t.Helper()
	cp := &ControlPlane{Dir: t.TempDir(), bin: Binary(t)}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	upArgs := []string{"up", "--dir", cp.Dir}
	for _, add := range options {
		upArgs = add(t, upArgs)
	}
	begin := time.Now()
	up := exec.Command(cp.bin, upArgs...)
	up.Env = append(os.Environ(), dirEnv+"="+cp.Dir)
	var out bytes.Buffer
	up.Stdout, up.Stderr = &out, &out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var upErr error // Wait's result, set before exited closes
	go func() {
		upErr = up.Wait()
		close(exited)
	}()
	t.Cleanup(func() { cp.stop(t, up, exited) })

	var last error
	poll.Until(t, readyTimeout, func() string {
		return fmt.Sprintf("the control plane to be ready (last: %v)\n%s", last, cp.Logs())
	}, func() bool {
		select {
		case <-exited:
			t.Fatalf("controlplane up exited (%v) before it was ready:\n%s\n%s", upErr, out.Bytes(), cp.Logs())
		default:
		}
		last = cp.ready(t.Context())
		return last == nil
	})
	t.Logf("control plane ready in %s (%s)", time.Since(begin).Round(time.Millisecond), cp.Dir)
	return cp
}

// ready says what the control plane still lacks, or nil.
func (cp *ControlPlane) ready(ctx context.Context) error {
	if cp.Client == nil {
		if _, err := os.Stat(cp.Kubeconfig); err != nil {
			return err
		}
		config, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
		if err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			return err
		}
		cp.Config, cp.Client = config, client
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if body, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("/readyz: %w: %s", err, body)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		return err
	}
	_, err := cp.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	return err
}

// Kubectl runs kubectl as the admin and returns its standard output; its
// error carries the standard error.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, cp.bin, append([]string{"kubectl", "--kubeconfig", cp.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %q: %w: %s", args, err, stderr.Bytes())
	}
	return stdout.String(), nil
}

// stop ends up (which stops the components) and fails t for any of its
// processes still running after.
func (cp *ControlPlane) stop(t testing.TB, up *exec.Cmd, exited <-chan struct{}) {
	_ = up.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		t.Errorf("controlplane up did not stop within %s of SIGTERM: killed\n%s", stopTimeout, cp.Logs())
		_ = up.Process.Kill()
		<-exited
	}
	leftovers.KillMarked(t, dirEnv, cp.Dir)
}

// Logs is the end of each component's log, for a failure's message.
func (cp *ControlPlane) Logs() string {
	logs, _ := filepath.Glob(filepath.Join(cp.Dir, "logs", "*.log"))
	var b bytes.Buffer
	for _, log := range logs {
		data, err := os.ReadFile(log)
		if err != nil {
			continue
		}
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- %s (end)\n%s\n", log, data)
	}
	return b.String()
}
