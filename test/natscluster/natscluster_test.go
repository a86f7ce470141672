package natscluster_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/natscluster"
)

// deploy/'s configuration survives the reload that adds a node (docs/deploy.md:
// `systemctl reload nats-server` after a new jetlet-auth.conf): the server
// keeps its name, so its JetStream cluster takes the new file.
func TestTheDeployConfigurationReloads(t *testing.T) {
	c := natscluster.Start(t, natscluster.Config{
		File:     filepath.Join("..", "..", "deploy", "nats", "nats-server.conf"),
		Includes: map[string]string{"routes.conf": "", "jetlet-auth.conf": ""},
	})
	said := c.Reload(0)
	if !strings.Contains(said, "Reloaded server configuration") {
		t.Fatalf("the reload of %s: %s", c.Servers[0].Name, said)
	}
	c.WaitHealthy(time.Minute)
}
