package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

const (
	// stopGrace is how long a component has to exit after SIGTERM before
	// up kills it.
	stopGrace = 15 * time.Second
	// readyTimeout bounds kube-apiserver's start.
	readyTimeout = 2 * time.Minute
)

// up runs the control plane in dir until SIGTERM or SIGINT, or until a
// component exits: etcd in this process, the components as children of it.
func up(args []string) int {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for the control plane's state, certs, logs and kubeconfigs (required)")
	metricsServer := fs.String("metrics-server", "", "metrics-server's binary (test/kube/metricsserver), to run behind kube-apiserver's aggregation layer (kubectl top); none when empty")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: controlplane up --dir DIR [--metrics-server BINARY]")
		return 2
	}
	// A child's Pdeathsig fires when the thread that started it ends, not the
	// process: start them all from this one, kept until exit.
	runtime.LockOSThread()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *dir, *metricsServer); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		return 1
	}
	return 0
}

// component is one child process of up.
type component struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // Wait's result, set before done closes
}

func run(ctx context.Context, dir, metricsServer string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, sub := range []string{"pki", "logs", "etcd", "kube-scheduler", "kube-controller-manager", "metrics-server"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	p, err := newPKI(filepath.Join(dir, "pki"), "controlplane-ca")
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := p.writeKey("sa.key"); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	// The aggregation layer's own CA, as kubeadm's front-proxy-ca: a
	// client cert of it lets kube-apiserver name the user to an
	// extension API server (metrics-server) in request headers.
	frontProxy, err := newPKI(filepath.Join(dir, "pki", "front-proxy"), "front-proxy-ca")
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := frontProxy.client("front-proxy-client", frontProxyClient); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	for _, c := range []struct{ name, cn, org string }{
		{"kube-apiserver", "", ""},
		{"admin", "kubernetes-admin", "system:masters"},
		{"kube-scheduler", "system:kube-scheduler", ""},
		{"kube-controller-manager", "system:kube-controller-manager", ""},
		// What kube-apiserver shows a node's kubelet API (logs, exec,
		// port-forward): kubeadm's apiserver-kubelet-client.
		{"kube-apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
		// metrics-server's user, to kube-apiserver and to the nodes'
		// kubelet APIs, with the rights its upstream manifest gives.
		{"metrics-server", "system:metrics-server", ""},
		{"metrics-server-serving", "", ""},
	} {
		if c.name == "metrics-server-serving" {
			// The aggregation layer checks the name of the APIService's
			// Service.
			err = p.serving(c.name, "metrics-server", "metrics-server.kube-system.svc")
		} else if c.cn == "" {
			err = p.serving(c.name, "kube-apiserver", serviceIP, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
		} else if c.org == "" {
			err = p.client(c.name, c.cn)
		} else {
			err = p.client(c.name, c.cn, c.org)
		}
		if err != nil {
			return fmt.Errorf("certs: %w", err)
		}
	}

	etcd, err := startEtcd(ctx, dir)
	if err != nil {
		return err
	}
	defer etcd.Close()
	etcdURL := "http://" + etcd.Clients[0].Addr().String()

	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(ports[0])
	kubeconfig := func(name string) string { return filepath.Join(dir, "pki", name+".kubeconfig") }
	for _, name := range []string{"kube-scheduler", "kube-controller-manager", "metrics-server", "admin"} {
		if err := p.kubeconfig(kubeconfig(name), name, server); err != nil {
			return err
		}
	}
	pki := p.path
	args := map[string][]string{
		"kube-apiserver": {
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0]),
			// The endpoint reconciler refuses a loopback address; nothing
			// in the cluster dials the kubernetes Service.
			"--endpoint-reconciler-type=none",
			"--tls-cert-file=" + pki("kube-apiserver.crt"), "--tls-private-key-file=" + pki("kube-apiserver.key"),
			"--client-ca-file=" + pki("ca.crt"),
			"--kubelet-client-certificate=" + pki("kube-apiserver-kubelet-client.crt"), "--kubelet-client-key=" + pki("kube-apiserver-kubelet-client.key"),
			"--authorization-mode=Node,RBAC",
			"--service-cluster-ip-range=" + serviceRange,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pki("sa.key"), "--service-account-signing-key-file=" + pki("sa.key"),
			"--allow-privileged=true",
			"--profiling=false",
			// The aggregation layer, as kubeadm sets it up.
			"--requestheader-client-ca-file=" + frontProxy.path("ca.crt"),
			"--requestheader-allowed-names=" + frontProxyClient,
			"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + frontProxy.path("front-proxy-client.crt"), "--proxy-client-key-file=" + frontProxy.path("front-proxy-client.key"),
		},
		"kube-scheduler": {
			"--kubeconfig=" + kubeconfig("kube-scheduler"),
			"--authentication-kubeconfig=" + kubeconfig("kube-scheduler"), "--authorization-kubeconfig=" + kubeconfig("kube-scheduler"),
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[1]), "--cert-dir=" + filepath.Join(dir, "kube-scheduler"),
			"--leader-elect=false",
			"--profiling=false",
		},
		"kube-controller-manager": {
			"--kubeconfig=" + kubeconfig("kube-controller-manager"),
			"--authentication-kubeconfig=" + kubeconfig("kube-controller-manager"), "--authorization-kubeconfig=" + kubeconfig("kube-controller-manager"),
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]), "--cert-dir=" + filepath.Join(dir, "kube-controller-manager"),
			"--leader-elect=false",
			"--root-ca-file=" + pki("ca.crt"),
			"--service-account-private-key-file=" + pki("sa.key"),
			"--use-service-account-credentials=true",
			"--cluster-signing-cert-file=" + pki("ca.crt"), "--cluster-signing-key-file=" + pki("ca.key"),
			// A Node whose Lease is not renewed goes Unknown after 20 s, not
			// the default 50 s (tests wait for it): still twice the 10 s at
			// which kubelet, and the bridge, renew a Lease.
			"--node-monitor-grace-period=20s",
			"--profiling=false",
		},
		// As its upstream manifest runs it, but at its shortest resolution
		// (kubectl top needs two scrapes) and with the nodes' kubelet API
		// on their own ports at their InternalIP. Their serving certs are
		// self-signed, as a kubelet's are without --tls-cert-file.
		"metrics-server": {
			"--kubeconfig=" + kubeconfig("metrics-server"),
			"--authentication-kubeconfig=" + kubeconfig("metrics-server"), "--authorization-kubeconfig=" + kubeconfig("metrics-server"),
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[3]),
			"--tls-cert-file=" + pki("metrics-server-serving.crt"), "--tls-private-key-file=" + pki("metrics-server-serving.key"),
			"--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port", "--kubelet-insecure-tls",
			"--metric-resolution=10s", "--kubelet-request-timeout=5s",
			"--profiling=false",
		},
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	names := []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager"}
	if metricsServer != "" {
		names = append(names, "metrics-server")
	}
	var running []*component
	defer func() { stopAll(running) }()
	exited := make(chan *component, len(names))
	for _, name := range names {
		if name == "metrics-server" {
			// Its rights and its APIService first: it reads its
			// authentication config from kube-system at start.
			if err := registerMetricsServer(self, dir, kubeconfig("admin"), ports[3], p); err != nil {
				return err
			}
		}
		argv := append([]string{self, name}, args[name]...)
		if name == "metrics-server" {
			argv = append([]string{metricsServer}, args[name]...)
		}
		c, err := start(name, argv, filepath.Join(dir, "logs", name+".log"), exited)
		if err != nil {
			return err
		}
		running = append(running, c)
		if name != "kube-apiserver" {
			continue
		}
		// The others exit when their first requests are refused: RBAC's
		// roles for them are made during kube-apiserver's start.
		if err := awaitReady(ctx, p, server, c); err != nil {
			return err
		}
	}
	// The admin's kubeconfig last: its presence says that everything started.
	admin := filepath.Join(dir, "admin.kubeconfig")
	if err := p.kubeconfig(admin, "admin", server); err != nil {
		return err
	}
	fmt.Printf("controlplane: kube-apiserver at %s, kubeconfig %s, logs in %s\n", server, admin, filepath.Join(dir, "logs"))

	select {
	case <-ctx.Done():
		return nil
	case err := <-etcd.Err():
		return fmt.Errorf("etcd: %w", err)
	case c := <-exited:
		return fmt.Errorf("%s exited (%v): see %s", c.name, c.err, filepath.Join(dir, "logs", c.name+".log"))
	}
}

// awaitReady polls kube-apiserver's /readyz as the admin until it is ok.
func awaitReady(ctx context.Context, p *pki, server string, apiserver *component) error {
	client, err := p.httpClient("admin")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		last = err
		select {
		case <-tick.C:
		case <-apiserver.done:
			return fmt.Errorf("kube-apiserver exited (%v) before it was ready", apiserver.err)
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (%v): %w", last, ctx.Err())
		}
	}
}

func startEtcd(ctx context.Context, dir string) (*embed.Etcd, error) {
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(dir, "logs", "etcd.log")}
	cfg.UnsafeNoFsync = true // a test's data: speed over durability
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

// freePorts returns n loopback ports free now. The components take flags,
// not listeners, so another process could take one first; then that
// component fails to start and up exits saying so.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// start runs argv as the component called name, its output to logPath.
func start(name string, argv []string, logPath string, exited chan<- *component) (*component, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &component{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
		exited <- c
	}()
	return c, nil
}

// stopAll sends SIGTERM to each component still running and waits for them,
// killing those still there after stopGrace.
func stopAll(cs []*component) {
	for _, c := range cs {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(stopGrace)
	defer deadline.Stop()
	for _, c := range cs {
		select {
		case <-c.done:
		case <-deadline.C:
			for _, c := range cs {
				_ = c.cmd.Process.Kill()
			}
			for _, c := range cs {
				<-c.done
			}
			return
		}
	}
}
