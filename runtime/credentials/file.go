package credentials

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// File is a config.json on disk, read at Load and read again by Lookup when
// its modification time or size changed (one stat per pull; pulls are rare
// next to everything else a pull costs). A file that becomes unreadable or
// invalid keeps the last good keyring, with a warning once per change; a file
// that is removed leaves no credentials.
type File struct {
	path string
	log  zerolog.Logger

	mu      sync.Mutex // guards the fields below; Lookup runs from several pod workers
	keyring *Keyring
	modTime time.Time
	size    int64
	// badSeen is the modification time and size of the last file that could
	// not be used, so that its warning is logged once.
	badModTime time.Time
	badSize    int64
}

// Load reads the file at path. An error (unreadable, not config.json) is for
// the caller to refuse to start with: a node silently without its
// credentials would fail every private pull.
func Load(path string, log zerolog.Logger) (*File, error) {
	f := &File{path: path, log: log.With().Str("component", "credentials").Str("file", path).Logger()}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	k, err := readKeyring(path)
	if err != nil {
		return nil, err
	}
	f.keyring, f.modTime, f.size = k, fi.ModTime(), fi.Size()
	f.logLoaded(k)
	return f, nil
}

func readKeyring(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func (f *File) logLoaded(k *Keyring) {
	f.log.Info().Int("registries", k.Len()).Msg("registry credentials loaded")
	if h := k.CredentialHelpers(); len(h) > 0 {
		f.log.Warn().Strs("ignored", h).Msg("credential helpers are not run by jetlet; only auths entries are used")
	}
}

// Lookup returns the credentials for image, in the order to try them, from
// the file as it is now.
func (f *File) Lookup(image string) []*runtimeapi.AuthConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshLocked()
	return f.keyring.Lookup(image)
}

func (f *File) refreshLocked() {
	fi, err := os.Stat(f.path)
	if err != nil {
		if f.keyring.Len() > 0 {
			f.log.Warn().Err(err).Msg("registry credentials file gone: pulling without credentials")
		}
		f.keyring, f.modTime, f.size = &Keyring{}, time.Time{}, 0
		return
	}
	if fi.ModTime().Equal(f.modTime) && fi.Size() == f.size {
		return
	}
	if fi.ModTime().Equal(f.badModTime) && fi.Size() == f.badSize {
		return
	}
	k, err := readKeyring(f.path)
	if err != nil {
		f.badModTime, f.badSize = fi.ModTime(), fi.Size()
		f.log.Warn().Err(err).Msg("registry credentials file changed but cannot be used: keeping the previous credentials")
		return
	}
	f.keyring, f.modTime, f.size = k, fi.ModTime(), fi.Size()
	f.logLoaded(k)
}
