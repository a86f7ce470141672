package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/runtime/credentials"
)

// defaultCredentialsFile, in the data dir, is read for registry credentials
// when --image-credentials is not given, as kubelet reads a node-wide
// config.json from its root directory.
const defaultCredentialsFile = "config.json"

// loadImageCredentials reads the registry credentials of image pulls: the
// file --image-credentials names (it must exist), else <dataDir>/config.json
// when present, else none.
func loadImageCredentials(flag, dataDir string, log zerolog.Logger) (reconcile.Credentials, error) {
	path := flag
	if path == "" {
		path = filepath.Join(dataDir, defaultCredentialsFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return reconcile.NoCredentials{}, nil
		}
	}
	f, err := credentials.Load(path, log)
	if err != nil {
		return nil, fmt.Errorf("--image-credentials: %w", err)
	}
	return f, nil
}
