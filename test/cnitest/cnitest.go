// Package cnitest gives tests a CNI network of their own: a bridge +
// host-local config with a bridge and a subnet no other test uses, and the
// plugins of Debian's containernetworking-plugins.
package cnitest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// PluginDir is where Debian's containernetworking-plugins puts the plugins.
const PluginDir = "/usr/lib/cni"

// NetworkName is the name of the network Network writes.
const NetworkName = "jetlet-test"

// Require skips the test unless it runs as root with the bridge, host-local
// and loopback plugins installed.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces and CNI plugins need root")
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(PluginDir, p)); err != nil {
			t.Skipf("CNI plugin %s not in %s (apt-get install containernetworking-plugins)", p, PluginDir)
		}
	}
}

// Net is a test's CNI network.
type Net struct {
	// ConfDir holds the network's conflist.
	ConfDir string
	// Prefix is the subnet's first three octets with the dot: "10.88.123.".
	Prefix string
	// Store is host-local's data dir: a file per reserved address under
	// Store/NetworkName.
	Store string
}

// Network writes a bridge + host-local conflist with its own bridge (removed
// at cleanup) and a random 10.88.x.0/24 subnet, the bridge the pods' gateway.
func Network(t testing.TB) Net {
	t.Helper()
	var b [2]byte
	_, _ = rand.Read(b[:])
	bridge := "jlt" + hex.EncodeToString(b[:])
	n := Net{ConfDir: t.TempDir(), Prefix: fmt.Sprintf("10.88.%d.", 100+int(b[0])%150), Store: t.TempDir()}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "%s0/24"}]]}
  }]
}`, NetworkName, bridge, n.Store, n.Prefix)
	if err := os.WriteFile(filepath.Join(n.ConfDir, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })
	return n
}

// Reserved reports whether host-local holds ip.
func (n Net) Reserved(ip string) bool {
	_, err := os.Stat(filepath.Join(n.Store, NetworkName, ip))
	return err == nil
}
