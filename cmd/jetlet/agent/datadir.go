package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/schemas"
)

// nodeFile, in the data dir, holds the name of the node the data dir
// belongs to (CONTRACT.md section 7).
const nodeFile = "node"

// claimDataDir makes dir node's data dir: on first use it records node; later
// it refuses any other node unless rename, which records the new name and
// returns the old one. The data dir's pods, logs and volumes are one node's:
// run under another name, that node would find no intent for them and kill
// them as orphans, so a changed host name (the default --node) must stop
// jetlet, not empty the node.
func claimDataDir(dir, node string, rename bool) (renamedFrom string, err error) {
	path := filepath.Join(dir, nodeFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", writeNodeFile(path, node)
	}
	if err != nil {
		return "", fmt.Errorf("--data-dir: %w", err)
	}
	recorded := strings.TrimSpace(string(data))
	switch {
	case recorded == node:
		return "", nil
	case !schemas.ValidNodeName(recorded):
		return "", fmt.Errorf("--data-dir: %s holds %q, not a node name; it records the node the data dir belongs to", path, recorded)
	case !rename:
		return "", fmt.Errorf("--data-dir %s belongs to node %q, not %q: run with --node %s, or add --rename-node to make it node %q's (see docs/running.md)",
			dir, recorded, node, recorded, node)
	}
	return recorded, writeNodeFile(path, node)
}

func writeNodeFile(path, node string) error {
	if err := atomicfile.Write(path, []byte(node+"\n"), 0o644); err != nil {
		return fmt.Errorf("--data-dir: record the node name: %w", err)
	}
	return nil
}
