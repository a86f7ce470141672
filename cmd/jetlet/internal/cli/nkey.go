package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nats-io/nkeys"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/internal/atomicfile"
)

// ClientSeedFile is the nkey seed, in the data dir, that the embedded NATS
// server admits and the client commands present (docs/contract.md section 7).
const ClientSeedFile = client.SeedFile

func ClientSeedPath(dataDir string) string { return filepath.Join(dataDir, ClientSeedFile) }

// EnsureClientSeed returns the public key of the client seed in dataDir,
// writing a new seed first when there is none. An existing seed that anyone
// but its owner may read or change, or that another user owns, is refused: it
// would let someone else drive this node.
func EnsureClientSeed(dataDir string) (string, error) {
	return EnsureUserSeed(ClientSeedPath(dataDir))
}

// EnsureUserSeed returns the public key of the user nkey seed at path,
// writing a new seed first when there is none; the checks are ReadOwnSeed's.
func EnsureUserSeed(path string) (string, error) {
	seed, err := ReadOwnSeed(path)
	if errors.Is(err, fs.ErrNotExist) {
		seed, err = writeNewSeed(path)
	}
	if err != nil {
		return "", err
	}
	// As nats.go reads it for the clients: a bare seed or an nsc-decorated one.
	kp, err := nkeys.ParseDecoratedNKey(seed)
	if err != nil {
		return "", fmt.Errorf("NATS client seed %s: %w; delete it and jetlet writes a new one", path, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("NATS client seed %s: %w", path, err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("NATS client seed %s: not a user nkey seed; delete it and jetlet writes a new one", path)
	}
	return pub, nil
}

// ReadOwnSeed reads the seed at path (the NATS client's, the node's curve
// key) after checking that only the user running jetlet owns and may read
// or write it; its errors name the file, which says whose seed it is.
func ReadOwnSeed(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("seed %s is owned by uid %d, not by uid %d running jetlet; run jetlet as its owner, or move it away and jetlet writes a new one", path, st.Uid, os.Getuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("seed %s has mode %04o: others than its owner may use it; `chmod 600 %s`, or delete it and jetlet writes a new one", path, perm, path)
	}
	return os.ReadFile(path)
}

// writeNewSeed writes a new user nkey seed to path atomically, readable by its
// owner only, and returns it.
func writeNewSeed(path string) ([]byte, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed() // kp.Wipe would wipe this too
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, append(seed, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("write NATS client seed %s: %w", path, err)
	}
	return seed, nil
}
