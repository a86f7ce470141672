package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/nats-io/nkeys"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/internal/atomicfile"
)

// nodeKeyFile, in the data dir, holds the seed of the node's curve key pair:
// Secrets are sealed for its public key, the node record's xkey (docs/contract.md
// section 11).
const nodeKeyFile = "node-xkey.nk"

func nodeKeyPath(dataDir string) string { return filepath.Join(dataDir, nodeKeyFile) }

// LoadOrCreateNodeKey returns the curve key pair whose seed is at path,
// writing a new seed first (0600, atomically) when there is none. A seed
// anyone but its owner may read, or that another user owns, is refused as the
// NATS client seed is: whoever reads it reads every Secret sealed for this node.
func LoadOrCreateNodeKey(path string) (nkeys.KeyPair, error) {
	seed, err := cli.ReadOwnSeed(path)
	if errors.Is(err, fs.ErrNotExist) {
		seed, err = writeNewNodeKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("node xkey: %w", err)
	}
	defer clear(seed)
	kp, err := nkeys.FromCurveSeed(bytes.TrimSpace(seed))
	if err != nil {
		return nil, fmt.Errorf("node xkey %s: %w; delete it and jetlet writes a new one (then seal this node's Secrets again)", path, err)
	}
	return kp, nil
}

func writeNewNodeKey(path string) ([]byte, error) {
	kp, err := nkeys.CreateCurveKeys()
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed() // a copy: kp.Wipe leaves it
	kp.Wipe()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, append(seed, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return seed, nil
}
