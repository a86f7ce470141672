package testimages

import (
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// What Layered's second layer puts in its files.
const (
	LayeredHello      = "hello from layer 2\n"
	LayeredOwned      = "owned by jetlet\n"
	LayeredReadme     = "/usr/sbin holds only this file: the second layer made it opaque\n"
	LayeredGreeting   = "hello from layered"
	LayeredEntrypoint = "#!/bin/sh\necho \"$LAYERED_GREETING in $(pwd)\"\nexec \"$@\"\n"
	// LayeredOutput is what the image prints when run with its own
	// entrypoint and command.
	LayeredOutput = LayeredGreeting + " in /opt/layered\n" + LayeredHello
)

// Layered is Busybox (its layer, the same blob) and a second layer that
// exercises what an unpacker must get right. The second layer holds, every
// file owned by root unless said, every time Epoch:
//
//	/var/www/.wh.index.html       a whiteout: /var/www/index.html of the
//	                              first layer is gone; /var/www stays, empty
//	/usr/sbin/.wh..wh..opq        an opaque dir: every applet the first layer
//	                              had in /usr/sbin (hard links: httpd,
//	                              chroot, ...) is gone
//	/usr/sbin/README              LayeredReadme, 0644: all /usr/sbin holds
//	/opt/layered/hello.txt        LayeredHello, 0644
//	/opt/layered/hardlink.txt     a hard link to hello.txt (one inode)
//	/opt/layered/symlink.txt      a symlink to "hello.txt" (relative)
//	/opt/layered/owned.txt        LayeredOwned, 0640, owned by 1000:1000
//	/opt/layered/entrypoint.sh    LayeredEntrypoint, 0755: prints
//	                              "$LAYERED_GREETING in $(pwd)", then execs
//	                              its arguments
//	/opt, /opt/layered, /usr,     0755 (the whiteouts' and files' parents)
//	/usr/sbin, /var, /var/www
//
// Everything else is Busybox's first layer as it was (/bin/sh, /bin/ls,
// /etc/passwd, ...). The config: Entrypoint ["/opt/layered/entrypoint.sh"],
// Cmd ["cat", "hello.txt"], Env [Path, "LAYERED_GREETING=hello from
// layered"], WorkingDir /opt/layered; run as it is, the image prints
// LayeredOutput and exits 0.
func Layered() (v1.Image, error) { return layered() }

var layered = sync.OnceValues(func() (v1.Image, error) {
	l, err := newLayer([]entry{
		dir("opt", 0o755), dir("opt/layered", 0o755),
		file("opt/layered/hello.txt", 0o644, LayeredHello),
		hardlink("opt/layered/hardlink.txt", "opt/layered/hello.txt"),
		symlink("opt/layered/symlink.txt", "hello.txt"),
		file("opt/layered/owned.txt", 0o640, LayeredOwned).owned(1000, 1000),
		file("opt/layered/entrypoint.sh", 0o755, LayeredEntrypoint),
		dir("usr", 0o755), dir("usr/sbin", 0o755),
		file("usr/sbin/.wh..wh..opq", 0o644, ""),
		file("usr/sbin/README", 0o644, LayeredReadme),
		dir("var", 0o755), dir("var/www", 0o755),
		file("var/www/.wh.index.html", 0o644, ""),
	})
	if err != nil {
		return nil, err
	}
	return derive(busybox, func(c *v1.Config) {
		c.Entrypoint = []string{"/opt/layered/entrypoint.sh"}
		c.Cmd = []string{"cat", "hello.txt"}
		c.Env = []string{Path, "LAYERED_GREETING=" + LayeredGreeting}
		c.WorkingDir = "/opt/layered"
	}, addendum(l, "layered: a whiteout, an opaque dir, a hard link, a symlink, a file of jetlet's"))
})
