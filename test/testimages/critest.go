package testimages

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// CritestRegistries are the registries critest v1.37.0 names its images in.
// Its test-images file (-test-images-file) can move only two of them
// (defaultTestContainerImage, webServerTestImage); the rest are constants of
// its source, so the critest stage answers for these names itself (a
// registry on 127.0.0.1 over TLS, the names in /etc/hosts).
var CritestRegistries = []string{"registry.k8s.io", "gcr.io", "k8s.gcr.io"}

// The references of critest v1.37.0 (sigs.k8s.io/cri-tools pkg/validate and
// pkg/framework) that Critest holds an image for.
const (
	CritestBusybox    = "registry.k8s.io/e2e-test-images/busybox:1.29-2"      // framework.DefaultLinuxContainerImage
	CritestNginx      = "registry.k8s.io/e2e-test-images/nginx:1.14-2"        // the web server and the PID-namespace specs
	CritestHttpd      = "registry.k8s.io/e2e-test-images/httpd:2.4.39-4"      // Multiple Containers
	CritestNonewprivs = "registry.k8s.io/e2e-test-images/nonewprivs:1.3"      // NoNewPrivs
	CritestPause      = "registry.k8s.io/pause:3.9"                           // the same image from two registries
	CritestPauseOld   = "k8s.gcr.io/pause:3.9"                                // ... and the other one
	critestStaging    = "gcr.io/k8s-staging-cri-tools/"                       // images/build of cri-tools
	CritestTestImage  = critestStaging + "test-image-tag:test"                // most Image Manager specs
	CritestPredefined = critestStaging + "test-image-predefined-group:latest" // SupplementalGroupsPolicy
)

// CritestNginxPIDFile is where Critest's nginx look-alike writes its
// worker's pid, as nginx does.
const CritestNginxPIDFile = "/var/run/nginx.pid"

// CritestPasswd and CritestGroup are /etc/passwd and /etc/group of Critest's
// images, the docker busybox image's (critest's images are built FROM it).
const (
	CritestPasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
`
	CritestGroup = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
kmem:x:9:
wheel:x:10:root
cdrom:x:11:
dialout:x:18:
floppy:x:19:
video:x:28:
audio:x:29:
tape:x:32:
www-data:x:33:
operator:x:37:
utmp:x:43:
plugdev:x:46:
staff:x:50:
lock:x:54:
netdev:x:82:
users:x:100:
nogroup:x:65534:
`
)

// Scripts of Critest's layers: look-alikes, made of busybox, of what
// critest's images run.
const (
	// pgrep and ipcs: critest runs them in its busybox image, and Debian's
	// busybox-static has neither.
	critestPgrep = `#!/bin/sh
# pgrep PATTERN, a look-alike of procps' pgrep (Debian's busybox-static has
# none): the pids of the processes whose name (/proc/PID/comm) matches the
# extended regular expression PATTERN, one a line, but its own; exit 0 when
# one matched, 1 when none did.
if [ $# -ne 1 ]; then
	echo "usage: pgrep PATTERN" >&2
	exit 2
fi
status=1
for d in /proc/[0-9]*; do
	pid=${d#/proc/}
	[ "$pid" = "$$" ] && continue
	read -r comm 2>/dev/null <"$d/comm" || continue
	if echo "$comm" | grep -Eq -- "$1"; then
		echo "$pid"
		status=0
	fi
done
exit $status
`
	critestIpcs = `#!/bin/sh
# ipcs [-m], a look-alike of util-linux's ipcs (Debian's busybox-static has
# none): the System V shared memory segments of the caller's IPC namespace,
# from /proc/sysvipc/shm. Message queues and semaphores are not listed.
case "${1:--m}" in
-m) ;;
*)
	echo "ipcs: this look-alike lists shared memory (-m) only" >&2
	exit 1
	;;
esac
echo
echo "------ Shared Memory Segments --------"
echo "key        shmid      owner      perms      bytes      nattch     status"
awk 'NR > 1 { key = $1; if (key < 0) key += 4294967296; printf "0x%08x %-10s %-10s %-10s %-10s %-10s\n", key, $2, $8, $3, $4, $7 }' /proc/sysvipc/shm
echo
`
	// The nginx look-alike's entrypoint, run as
	// /bin/sh /docker-entrypoint.sh "nginx: master process nginx -g daemon off;".
	critestNginxEntrypoint = `#!/bin/sh
# An nginx look-alike for critest, made of busybox. Its command line (the
# image's Cmd, given to this script and otherwise unused) says "nginx: master
# process", as nginx's master does. Its worker is busybox's httpd serving
# /usr/share/nginx/html on port ${NGINX_PORT:-80}, run as /usr/sbin/nginx (a
# link to busybox: the process is named nginx, for pidof; the name its
# command line gives, ending in /bin/busybox, makes busybox run the applet
# named next). /var/run/nginx.pid holds the worker's pid. SIGTERM or SIGINT
# stops both.
(exec -a "nginx: worker process /bin/busybox" /usr/sbin/nginx httpd -f -p "${NGINX_PORT:-80}" -h /usr/share/nginx/html) &
worker=$!
echo "$worker" >/var/run/nginx.pid
trap 'kill "$worker" 2>/dev/null; wait "$worker"; exit 0' TERM INT
wait "$worker"
`
	critestHttpdForeground = `#!/bin/sh
# An httpd look-alike for critest, made of busybox: busybox's httpd serves
# /usr/local/apache2/htdocs on port 80 in the foreground. Apache's httpd names
# itself in its log as it starts ("AH00558: httpd: Could not reliably
# determine the server's fully qualified domain name"), and critest looks for
# "httpd" there; this line says it too.
echo "httpd-foreground: busybox httpd serving /usr/local/apache2/htdocs on port 80" >&2
exec httpd -f -p 80 -h /usr/local/apache2/htdocs
`
	// The nonewprivs look-alike: kubernetes' e2e image is a setuid-root C
	// program that prints its effective uid.
	critestNnp = `#!/bin/sh
# A nonewprivs look-alike for critest, made of busybox: it prints
# "Effective uid: N", N the effective uid a setuid-root program gets when run
# by the container's user. /usr/local/bin/busybox-suid is busybox, setuid
# root, and /etc/busybox.conf lets its whoami keep that privilege. Without
# no_new_privs, whoami runs as root; with no_new_privs the kernel ignores the
# setuid bit, busybox cannot take the privilege /etc/busybox.conf names, and
# whoami fails: the effective uid is the caller's own. (/usr/bin/id by its path:
# with /etc/busybox.conf, Debian's busybox-static crashes running an applet
# inside the shell for a user other than root.)
if name=$(/usr/local/bin/busybox-suid whoami 2>/dev/null); then
	echo "Effective uid: $(/usr/bin/id -u "$name")"
else
	echo "Effective uid: $(/usr/bin/id -u)"
fi
`
	critestBusyboxConf = "[SUID]\nwhoami = ssx root.root\n"
	critestPause       = `#!/bin/sh
# A pause look-alike for critest, made of busybox: it waits until SIGTERM or
# SIGINT.
trap 'kill $! 2>/dev/null; exit 0' TERM INT
while :; do
	sleep 3600 &
	wait $!
done
`
	critestItWorks = "<html><body><h1>It works!</h1></body></html>\n"
	critestWelcome = "<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1></body></html>\n"
)

// Critest is an image for each reference critest v1.37.0 pulls (on
// linux/GOARCH), built as critest's own are (cri-tools images/ and
// kubernetes' e2e images) where a spec looks, with busybox-static for every
// program. Every image is Busybox's layer, then a layer of critest's base:
// /etc/passwd and /etc/group of the docker busybox image (CritestPasswd,
// CritestGroup) and the look-alikes /usr/local/bin/pgrep and
// /usr/local/bin/ipcs (Debian's busybox-static has neither, critest runs
// both); then, by reference:
//
//   - CritestBusybox: nothing more; Cmd ["sh"].
//   - CritestNginx: an nginx look-alike: /docker-entrypoint.sh (Entrypoint
//     ["/bin/sh", "/docker-entrypoint.sh"], Cmd ["nginx: master process
//     nginx -g daemon off;"], so that pid 1's command line says "master
//     process") runs busybox's httpd on port 80 (ExposedPorts 80/tcp) as a
//     process named nginx, serving /usr/share/nginx/html/index.html, its pid
//     in CritestNginxPIDFile.
//   - gcr.io/k8s-staging-cri-tools/hostnet-nginx-<GOARCH>:latest: the same
//     on port 12003 (Env NGINX_PORT=12003), for the host network.
//   - CritestHttpd: /usr/local/bin/httpd-foreground (Cmd) says "httpd" on
//     stderr and runs busybox's httpd on port 80 serving
//     /usr/local/apache2/htdocs/index.html ("It works!").
//   - CritestNonewprivs: Entrypoint ["/usr/local/bin/nnp"], which prints
//     "Effective uid: N" as a setuid-root program sees it (through
//     /usr/local/bin/busybox-suid, busybox setuid root, and
//     /etc/busybox.conf; the script says how).
//   - CritestPause and CritestPauseOld (one image): /pause, which waits for
//     SIGTERM; Entrypoint ["/pause"], User "65535:65535" as pause:3.9's.
//   - gcr.io/k8s-staging-cri-tools/test-image-<x>: cri-tools'
//     images/image-test, an empty file /<name> (test-image-1, -2, -3 and
//     test-image-latest: /test-image-1 ... : four images; test-image-tags:1,
//     :2, :3: one image with /same-image; test-image-tag:test and :all: two,
//     /test and /all); Cmd ["sh"].
//   - test-image-user-uid, -user-username, -user-uid-group,
//     -user-username-group: User "1002", "www-data", "1003:1004",
//     "www-data:1004" (images/image-user).
//   - CritestPredefined: User "1000", and a layer whose /etc/passwd adds
//     default-user (1000:1000, home /home/default-user) and /etc/group adds
//     default-user (1000) and group-defined-in-image (50000, default-user a
//     member) (images/image-predefined-group).
//
// Not served: gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9...
// (a build cannot make bytes with another build's digest).
func Critest() (map[string]v1.Image, error) { return critest() }

var critestBase = sync.OnceValues(func() (v1.Image, error) {
	l, err := newLayer([]entry{
		dir("etc", 0o755),
		file("etc/passwd", 0o644, CritestPasswd),
		file("etc/group", 0o644, CritestGroup),
		dir("usr", 0o755), dir("usr/local", 0o755), dir("usr/local/bin", 0o755),
		file("usr/local/bin/pgrep", 0o755, critestPgrep),
		file("usr/local/bin/ipcs", 0o755, critestIpcs),
	})
	if err != nil {
		return nil, err
	}
	return derive(busybox, func(*v1.Config) {}, addendum(l, "critest: docker busybox's /etc/passwd and /etc/group; pgrep and ipcs look-alikes"))
})

var critest = sync.OnceValues(func() (map[string]v1.Image, error) {
	images := map[string]v1.Image{}
	add := func(ref string, img v1.Image, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		images[ref] = img
		return nil
	}
	base, err := critestBase()
	if err := add(CritestBusybox, base, err); err != nil {
		return nil, err
	}
	layered := func(createdBy string, edit func(*v1.Config), entries ...entry) (v1.Image, error) {
		l, err := newLayer(entries)
		if err != nil {
			return nil, err
		}
		return derive(critestBase, edit, addendum(l, createdBy))
	}
	nginx := func(port string) (v1.Image, error) {
		return layered("critest: an nginx look-alike (busybox httpd)", func(c *v1.Config) {
			c.Entrypoint = []string{"/bin/sh", "/docker-entrypoint.sh"}
			c.Cmd = []string{"nginx: master process nginx -g daemon off;"}
			c.ExposedPorts = map[string]struct{}{port + "/tcp": {}}
			if port != "80" {
				c.Env = append(c.Env, "NGINX_PORT="+port)
			}
		},
			file("docker-entrypoint.sh", 0o755, critestNginxEntrypoint),
			dir("usr", 0o755), dir("usr/sbin", 0o755), symlink("usr/sbin/nginx", "/bin/busybox"),
			dir("usr/share", 0o755), dir("usr/share/nginx", 0o755), dir("usr/share/nginx/html", 0o755),
			file("usr/share/nginx/html/index.html", 0o644, critestWelcome),
			dir("var", 0o755), dir("var/run", 0o755),
		)
	}
	img, err := nginx("80")
	if err := add(CritestNginx, img, err); err != nil {
		return nil, err
	}
	img, err = nginx("12003")
	if err := add(critestStaging+"hostnet-nginx-"+runtime.GOARCH+":latest", img, err); err != nil {
		return nil, err
	}
	img, err = layered("critest: an httpd look-alike (busybox httpd)", func(c *v1.Config) {
		c.Cmd = []string{"httpd-foreground"}
		c.ExposedPorts = map[string]struct{}{"80/tcp": {}}
	},
		dir("usr", 0o755), dir("usr/local", 0o755), dir("usr/local/bin", 0o755),
		file("usr/local/bin/httpd-foreground", 0o755, critestHttpdForeground),
		dir("usr/local/apache2", 0o755), dir("usr/local/apache2/htdocs", 0o755),
		file("usr/local/apache2/htdocs/index.html", 0o644, critestItWorks),
	)
	if err := add(CritestHttpd, img, err); err != nil {
		return nil, err
	}
	program, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, err
	}
	suid := file("usr/local/bin/busybox-suid", 0o4755, "")
	suid.Content = program
	img, err = layered("critest: a nonewprivs look-alike (busybox setuid root)", func(c *v1.Config) {
		c.Entrypoint = []string{"/usr/local/bin/nnp"}
		c.Cmd = nil
	},
		dir("etc", 0o755), file("etc/busybox.conf", 0o644, critestBusyboxConf),
		dir("usr", 0o755), dir("usr/local", 0o755), dir("usr/local/bin", 0o755),
		suid, file("usr/local/bin/nnp", 0o755, critestNnp),
	)
	if err := add(CritestNonewprivs, img, err); err != nil {
		return nil, err
	}
	img, err = layered("critest: a pause look-alike", func(c *v1.Config) {
		c.Entrypoint = []string{"/pause"}
		c.Cmd = nil
		c.User = "65535:65535"
	}, file("pause", 0o755, critestPause))
	if err := add(CritestPause, img, err); err != nil {
		return nil, err
	}
	images[CritestPauseOld] = img
	testImage := func(name string) (v1.Image, error) {
		return layered("critest: images/image-test, ADD "+name, func(*v1.Config) {}, file(name, 0o644, ""))
	}
	for _, n := range []string{"test-image-1", "test-image-2", "test-image-3", "test-image-latest"} {
		img, err := testImage(n)
		if err := add(critestStaging+n+":latest", img, err); err != nil {
			return nil, err
		}
	}
	img, err = testImage("same-image")
	for _, tag := range []string{"1", "2", "3"} {
		if err := add(critestStaging+"test-image-tags:"+tag, img, err); err != nil {
			return nil, err
		}
	}
	for _, tag := range []string{"test", "all"} {
		img, err := testImage(tag)
		if err := add(critestStaging+"test-image-tag:"+tag, img, err); err != nil {
			return nil, err
		}
	}
	for n, user := range map[string]string{
		"test-image-user-uid":            "1002",
		"test-image-user-username":       "www-data",
		"test-image-user-uid-group":      "1003:1004",
		"test-image-user-username-group": "www-data:1004",
	} {
		img, err := mutateUser(base, user)
		if err := add(critestStaging+n+":latest", img, err); err != nil {
			return nil, err
		}
	}
	img, err = layered("critest: images/image-predefined-group", func(c *v1.Config) { c.User = "1000" },
		dir("etc", 0o755),
		file("etc/passwd", 0o644, CritestPasswd+"default-user:x:1000:1000:Linux User,,,:/home/default-user:/bin/sh\n"),
		file("etc/group", 0o644, CritestGroup+"default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n"),
		dir("home", 0o755), dir("home/default-user", 0o755).owned(1000, 1000),
	)
	if err := add(CritestPredefined, img, err); err != nil {
		return nil, err
	}
	return images, nil
})

func mutateUser(img v1.Image, user string) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.User = user
	return mutate.ConfigFile(img, cf)
}
