package testimages

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const staging = "gcr.io/k8s-staging-cri-tools/"

func critestImages(t *testing.T) map[string]v1.Image {
	t.Helper()
	images, err := Critest()
	if err != nil {
		t.Fatal(err)
	}
	return images
}

func TestCritestHasAnImageForEachReferenceWithItsConfig(t *testing.T) {
	images := critestImages(t)
	base := digestOfLayers(t, images[CritestBusybox])
	fs := flattened(t, images[CritestBusybox])
	for _, p := range []string{"bin/sh", "bin/ls", "usr/local/bin/pgrep", "usr/local/bin/ipcs"} {
		if _, ok := fs[p]; !ok {
			t.Errorf("%s: no /%s", CritestBusybox, p)
		}
	}
	sh := []string{"sh"}
	nginx := v1.Config{
		Env: []string{Path}, Entrypoint: []string{"/bin/sh", "/docker-entrypoint.sh"},
		Cmd: []string{"nginx: master process nginx -g daemon off;"}, ExposedPorts: map[string]struct{}{"80/tcp": {}},
	}
	hostnet := nginx
	hostnet.Env = []string{Path, "NGINX_PORT=12003"}
	hostnet.ExposedPorts = map[string]struct{}{"12003/tcp": {}}
	user := func(u string) v1.Config { return v1.Config{Env: []string{Path}, Cmd: sh, User: u} }
	want := map[string]v1.Config{
		CritestBusybox: {Env: []string{Path}, Cmd: sh},
		CritestNginx:   nginx,
		staging + "hostnet-nginx-" + runtime.GOARCH + ":latest": hostnet,
		CritestHttpd:                           {Env: []string{Path}, Cmd: []string{"httpd-foreground"}, ExposedPorts: map[string]struct{}{"80/tcp": {}}},
		CritestNonewprivs:                      {Env: []string{Path}, Entrypoint: []string{"/usr/local/bin/nnp"}},
		CritestPause:                           {Env: []string{Path}, Entrypoint: []string{"/pause"}, User: "65535:65535"},
		CritestPauseOld:                        {Env: []string{Path}, Entrypoint: []string{"/pause"}, User: "65535:65535"},
		staging + "test-image-user-uid:latest": user("1002"),
		staging + "test-image-user-username:latest":       user("www-data"),
		staging + "test-image-user-uid-group:latest":      user("1003:1004"),
		staging + "test-image-user-username-group:latest": user("www-data:1004"),
		CritestPredefined: user("1000"),
	}
	for _, n := range []string{"test-image-1:latest", "test-image-2:latest", "test-image-3:latest", "test-image-latest:latest",
		"test-image-tags:1", "test-image-tags:2", "test-image-tags:3", "test-image-tag:test", "test-image-tag:all"} {
		want[staging+n] = v1.Config{Env: []string{Path}, Cmd: sh}
	}
	if len(images) != len(want) {
		t.Errorf("%d images, want %d", len(images), len(want))
	}
	for ref, w := range want {
		img, ok := images[ref]
		if !ok {
			t.Errorf("%s: missing", ref)
			continue
		}
		cf := config(t, img)
		if !configEqual(cf.Config, w) {
			t.Errorf("%s: config %+v, want %+v", ref, cf.Config, w)
		}
		if cf.Architecture != runtime.GOARCH || cf.OS != "linux" {
			t.Errorf("%s: %s/%s", ref, cf.OS, cf.Architecture)
		}
		if layers := digestOfLayers(t, img); len(layers) < 2 || !slices.Equal(layers[:2], base) {
			t.Errorf("%s: layers %v, want critest's base %v first", ref, layers, base)
		}
	}

	same := func(a, b string) bool { return digest(t, images[a]) == digest(t, images[b]) }
	if !same(CritestPause, CritestPauseOld) || !same(staging+"test-image-tags:1", staging+"test-image-tags:2") || !same(staging+"test-image-tags:1", staging+"test-image-tags:3") {
		t.Errorf("references to one image have two digests")
	}
	distinct := []string{staging + "test-image-1:latest", staging + "test-image-2:latest", staging + "test-image-3:latest",
		staging + "test-image-latest:latest", staging + "test-image-tags:1", CritestTestImage, staging + "test-image-tag:all", CritestBusybox}
	for i, a := range distinct {
		for _, b := range distinct[i+1:] {
			if same(a, b) {
				t.Errorf("%s and %s are one image", a, b)
			}
		}
	}
	for n, file := range map[string]string{"test-image-1:latest": "test-image-1", "test-image-tags:2": "same-image", "test-image-tag:all": "all"} {
		if f, ok := lastLayer(t, images[staging+n])[file]; !ok || f.hdr.Size != 0 {
			t.Errorf("%s: no empty /%s", n, file)
		}
	}

	paths, err := RegistryPaths(images)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := paths["e2e-test-images/busybox:1.29-2"]; !ok || len(paths) != len(images)-1 {
		t.Errorf("registry paths %v", paths)
	}
}

func TestCritestPredefinedGroupImage(t *testing.T) {
	fs := flattened(t, critestImages(t)[CritestPredefined])
	if got := fs["etc/passwd"].content; !strings.HasSuffix(got, "\ndefault-user:x:1000:1000:Linux User,,,:/home/default-user:/bin/sh\n") {
		t.Errorf("/etc/passwd:\n%s", got)
	}
	if got := fs["etc/group"].content; !strings.HasSuffix(got, "\ndefault-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n") {
		t.Errorf("/etc/group:\n%s", got)
	}
	if h := fs["home/default-user"].hdr; h == nil || h.Uid != 1000 {
		t.Errorf("/home/default-user: %+v", h)
	}
}

// The look-alikes, run in a chroot of their image.

func TestCritestPgrepAndIpcs(t *testing.T) {
	root := unpack(t, critestImages(t)[CritestBusybox])
	out := runInImage(t, root, []string{"--pid"}, "", []string{Path},
		"sh", "-c", "sleep 100 & sleep 0.3; pgrep sleep; pgrep '^nomatch$'; echo $?; kill $!")
	if !regexp.MustCompile(`^[0-9]+\n1\n$`).MatchString(out) {
		t.Errorf("pgrep: %q", out)
	}

	seg, err := exec.Command("ipcmk", "-M", "4096").Output()
	if err != nil {
		t.Skipf("ipcmk: %v", err)
	}
	id := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(seg)), "Shared memory id:"))
	t.Cleanup(func() { _ = exec.Command("ipcrm", "-m", id).Run() })
	ipcs := func(ns ...string) string { return runInImage(t, root, ns, "", []string{Path}, "ipcs", "-m") }
	hasID := regexp.MustCompile(`(?m)^0x[0-9a-f]{8} ` + regexp.QuoteMeta(id) + ` `)
	if out := ipcs(); !hasID.MatchString(out) {
		t.Errorf("ipcs -m in the host's IPC namespace does not list segment %s:\n%s", id, out)
	}
	if out := ipcs("--ipc"); hasID.MatchString(out) || !strings.Contains(out, "Shared Memory Segments") {
		t.Errorf("ipcs -m in an IPC namespace of its own:\n%s", out)
	}
}

func TestCritestNonewprivs(t *testing.T) {
	root := unpack(t, critestImages(t)[CritestNonewprivs])
	for _, c := range []struct {
		nnp  bool
		want string
	}{{false, "Effective uid: 0\n"}, {true, "Effective uid: 1000\n"}} {
		args := inImage(root, nil, "1000:1000", "/usr/local/bin/nnp").Args
		if c.nnp {
			args = append([]string{"setpriv", "--no-new-privs"}, args...)
		}
		if got := run(t, []string{Path}, args...); got != c.want {
			t.Errorf("no_new_privs %v: %q, want %q", c.nnp, got, c.want)
		}
	}
}

func TestCritestNginx(t *testing.T) {
	img := critestImages(t)[CritestNginx]
	root := unpack(t, img)
	cfg := config(t, img).Config
	port := freePort(t)
	cmd := inImage(root, nil, "", append(cfg.Entrypoint, cfg.Cmd...)...)
	cmd.Env = []string{Path, "NGINX_PORT=" + port}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	if got := httpGet(t, "http://127.0.0.1:"+port+"/"); !strings.Contains(got, "Welcome to nginx!") {
		t.Errorf("GET /: %q", got)
	}
	pidFile, err := os.ReadFile(filepath.Join(root, CritestNginxPIDFile))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := strconv.Atoi(strings.TrimSpace(string(pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", worker)); string(comm) != "nginx\n" {
		t.Errorf("the worker %d is named %q, want nginx (for pidof)", worker, comm)
	}
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)); !strings.Contains(string(cmdline), "master process") {
		t.Errorf("the master's command line %q does not say master process", cmdline)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not stop the nginx look-alike")
	}
	if err := syscall.Kill(worker, 0); err == nil {
		t.Errorf("the worker %d outlived its master", worker)
	}
}

func TestCritestHttpdSaysHttpdAndServes(t *testing.T) {
	img := critestImages(t)[CritestHttpd]
	root := unpack(t, img)
	// In a network namespace of its own, where port 80 is free; busybox's
	// wget fetches the page. In a pid namespace of its own too: httpd dies
	// with the shell.
	script := "ip link set lo up && { httpd-foreground >/dev/null 2>/tmp/log & } && sleep 0.5 && wget -q -O - http://127.0.0.1/ && cat /tmp/log"
	out := runInImage(t, root, []string{"--net", "--pid"}, "", []string{Path}, "sh", "-c", script)
	if !strings.Contains(out, "It works!") || !strings.Contains(out, "httpd-foreground: busybox httpd") {
		t.Errorf("output %q", out)
	}
}

func TestCritestPauseStopsOnSIGTERM(t *testing.T) {
	img := critestImages(t)[CritestPause]
	root := unpack(t, img)
	cmd := inImage(root, nil, "65535:65535", "/pause")
	cmd.Env = []string{Path}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not stop pause")
	}
}

func lastLayer(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	files, _ := layerFiles(t, img, len(digestOfLayers(t, img))-1)
	return files
}
