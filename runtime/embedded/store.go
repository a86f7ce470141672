package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// removeDirAtomic makes dir disappear at once (rename to a hidden name) and
// then deletes it; recovery finishes deletions a crash interrupted.
func removeDirAtomic(dir string) error {
	trash := filepath.Join(filepath.Dir(dir), ".removing-"+filepath.Base(dir))
	if err := os.Rename(dir, trash); err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	return os.RemoveAll(trash)
}

// newID returns a random 64-hex-digit id, the shape containerd uses.
func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("proc: crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// resolveID finds the one key of ids that equals or starts with prefix, as
// containerd's truncindex does, so the short ids crictl prints work.
func resolveID[T any](ids map[string]T, prefix, kind string) (string, error) {
	if prefix == "" {
		return "", errorf(crierr.ErrInvalidArgument, "%s id is empty", kind)
	}
	if _, ok := ids[prefix]; ok {
		return prefix, nil
	}
	found := ""
	for id := range ids {
		if strings.HasPrefix(id, prefix) {
			if found != "" {
				return "", errorf(crierr.ErrInvalidArgument, "%s id prefix %q is ambiguous", kind, prefix)
			}
			found = id
		}
	}
	if found == "" {
		return "", errorf(crierr.ErrNotFound, "%s %q not found", kind, prefix)
	}
	return found, nil
}

// reserveName reserves name for id; r.mu must be held.
func (r *Runtime) reserveName(name, id string) error {
	if other, ok := r.names[name]; ok && other != id {
		return errorf(crierr.ErrAlreadyExists, "name %q is reserved for %q", name, other)
	}
	r.names[name] = id
	return nil
}

func isNotFound(err error) bool {
	return errors.Is(err, crierr.ErrNotFound)
}
