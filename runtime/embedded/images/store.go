package images

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/schemas/imageref"
)

// Options configures a Store.
type Options struct {
	// Dir is the store's root (e.g. <runtime dir>/images); created 0700.
	Dir    string
	Logger zerolog.Logger
	// Insecure are registry hosts ("host", any port, or "host:port") pulled
	// over plain HTTP, besides localhost, 127.0.0.0/8 and ::1, which always
	// are (as Docker does). No other host is ever reached over plain HTTP.
	Insecure []string
	// Mirror is an optional "host:port" of a read-only registry tried first
	// for every reference, as containerd's certs.d/_default/hosts.toml
	// mirror, with ?ns=<registry> on every request; when a pull from it
	// fails (it lacks the image, or is down) the reference's own registry is
	// used. Credentials are never sent to the mirror.
	Mirror string
	// Pinned are references whose images are pinned (the sandbox image).
	Pinned []string
	// Transport carries the registry requests; nil is
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// Store is the embedded runtime's content-addressed image store, kept
// under Options.Dir:
//
//	images.json          records: images by id, and the holds of containers
//	layers/<diffid hex>/ an unpacked layer in overlayfs lower-dir format
//	layers/.tmp-*        a layer being unpacked (removed by Open)
//	layers/.rm-*         a layer being removed (removed by Open)
//	.import-*            an archive being imported (unlinked while in use)
//
// A layer directory exists while an image record, a hold or a running pull
// or import uses it; it appears whole (renamed into place after its content
// was verified and synced) or not at all.
type Store struct {
	// Set by Open and never changed: read by any goroutine without a lock.
	dir       string
	layersDir string
	log       zerolog.Logger
	insecure  []string
	mirror    string
	pinned    map[string]bool
	transport http.RoundTripper

	pulls   flightGroup[*Image]   // by normalised reference and credentials
	unpacks flightGroup[struct{}] // by diff id hex

	// mu guards the fields below; it is held while images.json is written,
	// never while a layer is fetched or unpacked.
	mu     sync.Mutex
	images map[string]*Image // by id
	holds  map[string]*hold  // by holder
	// pending counts, by diff id, the pulls and imports that use a layer
	// they have not recorded yet: such a layer is not collected.
	pending map[string]int
	// usage memoises the disk usage of unpacked layers (immutable), by
	// diff id.
	usage map[string]diskUsage
	// trashSeq numbers the layers/.rm-* names.
	trashSeq uint64
}

// hold is a container's use of an image: the layers stay while it lasts,
// even when the image's record is removed.
type hold struct {
	Image  string   `json:"image"`
	Layers []string `json:"layers"`
}

// records is images.json. Holds are each in a file of their own (holdsDir);
// images.json held them all once, and one written there is still read.
type records struct {
	Images []*Image         `json:"images"`
	Holds  map[string]*hold `json:"holds,omitempty"`
}

const recordsFile = "images.json"

// holdsDir holds one file per hold, <hex of the holder>.json, written at
// Hold and removed at Release: a container's start or removal writes its
// own, in parallel with the others', where rewriting images.json with
// every hold, under the store's lock, made each one wait for all the
// others (a quarter of jetlet's CPU deleting 1,000 pods was encoding it).
const holdsDir = "holds"

// holdFile is a hold's file.
type holdFile struct {
	Holder string `json:"holder"`
	hold
}

// Open opens the store at opts.Dir, creating it when missing: it loads the
// records, removes the temporary directories of unpacks and removals a
// crash interrupted, and removes layers no record or hold uses.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("open image store: no directory given")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("open image store %s: %w", opts.Dir, err)
	}
	s := &Store{
		dir:       dir,
		layersDir: filepath.Join(dir, "layers"),
		log:       opts.Logger.With().Str("component", "images").Logger(),
		mirror:    opts.Mirror,
		pinned:    make(map[string]bool),
		transport: opts.Transport,
		images:    make(map[string]*Image),
		holds:     make(map[string]*hold),
		pending:   make(map[string]int),
		usage:     make(map[string]diskUsage),
	}
	if s.transport == nil {
		s.transport = http.DefaultTransport
	}
	for _, h := range opts.Insecure {
		if h = strings.TrimSpace(h); h != "" {
			s.insecure = append(s.insecure, strings.ToLower(h))
		}
	}
	for _, p := range opts.Pinned {
		n, err := imageref.Normalize(p)
		if err != nil {
			return nil, fmt.Errorf("open image store %s: pinned image: %w", dir, err)
		}
		s.pinned[n] = true
	}
	if s.mirror != "" && (strings.Contains(s.mirror, "/") || hostname(s.mirror) == "") {
		return nil, fmt.Errorf("open image store %s: mirror %q is not host:port", dir, s.mirror)
	}
	for _, d := range []string{dir, s.layersDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open image store: %w", err)
		}
	}
	var rec records
	if err := atomicfile.ReadJSON(filepath.Join(dir, recordsFile), &rec); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open image store: %w", err)
	}
	for _, im := range rec.Images {
		// Layer ids become paths: a record naming anything else is not
		// trusted.
		if im == nil || !validID(im.ID) || slices.ContainsFunc(im.Layers, invalidID) {
			continue
		}
		im.Pinned = s.isPinned(im)
		s.images[im.ID] = im
	}
	for holder, h := range rec.Holds {
		if h != nil && !slices.ContainsFunc(h.Layers, invalidID) {
			s.holds[holder] = h
		}
	}
	if err := s.loadHolds(len(rec.Holds) > 0); err != nil {
		return nil, fmt.Errorf("open image store %s: %w", dir, err)
	}
	// An import's spool file is unlinked as soon as it is made; a crash
	// right between leaves it.
	if spools, err := filepath.Glob(filepath.Join(dir, ".import-*")); err == nil {
		for _, p := range spools {
			os.Remove(p)
		}
	}
	if err := s.cleanLayers(); err != nil {
		return nil, fmt.Errorf("open image store %s: %w", dir, err)
	}
	return s, nil
}

// cleanLayers removes what a crash left in layers/ (temporary dirs, and
// layers no record or hold uses), and drops the records of images one of
// whose layers is gone, so that the next pull fetches them again.
func (s *Store) cleanLayers() error {
	entries, err := os.ReadDir(s.layersDir)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	present := make(map[string]bool)
	var trash []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "."):
			trash = append(trash, filepath.Join(s.layersDir, name))
		case validHex(name) && e.IsDir() && s.inUseLocked("sha256:"+name):
			present["sha256:"+name] = true
		default:
			trash = append(trash, filepath.Join(s.layersDir, name))
		}
	}
	changed := false
	for id, im := range s.images {
		for _, l := range im.Layers {
			if !present[l] {
				s.log.Warn().Str("image", id).Str("layer", l).Msg("image dropped: a layer of it is missing from the store")
				delete(s.images, id)
				changed = true
				break
			}
		}
	}
	for holder, h := range s.holds {
		for _, l := range h.Layers {
			if !present[l] {
				s.log.Warn().Str("holder", holder).Str("layer", l).Msg("a layer held by a container is missing from the store")
			}
		}
	}
	if changed {
		if err := s.saveLocked(); err != nil {
			return err
		}
		trash = append(trash, s.collectLocked(slices.Collect(maps.Keys(present)))...)
	}
	for _, p := range trash {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// Lookup finds an image by id ("sha256:<hex>" or "<hex>"), by a unique
// prefix of at least 4 hex digits of its id, or by a reference (normalised
// first); nil when the store has none.
func (s *Store) Lookup(ref string) *Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	if im := s.lookupLocked(ref); im != nil {
		return im.clone()
	}
	return nil
}

func (s *Store) lookupLocked(ref string) *Image {
	if ref == "" {
		return nil
	}
	if im, ok := s.images[ref]; ok {
		return im
	}
	if im, ok := s.images["sha256:"+ref]; ok {
		return im
	}
	if n, err := imageref.Normalize(ref); err == nil {
		for _, im := range s.images {
			if im.hasName(n) {
				return im
			}
		}
	}
	prefix := strings.TrimPrefix(ref, "sha256:")
	if len(prefix) < 4 || strings.Trim(prefix, "0123456789abcdef") != "" {
		return nil
	}
	var found *Image
	for id, im := range s.images {
		if strings.HasPrefix(strings.TrimPrefix(id, "sha256:"), prefix) {
			if found != nil {
				return nil // ambiguous
			}
			found = im
		}
	}
	return found
}

// List returns every image, by id.
func (s *Store) List() []*Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Image, 0, len(s.images))
	for _, im := range s.images {
		out = append(out, im.clone())
	}
	slices.SortFunc(out, func(a, b *Image) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Remove drops the record of the image id names (any form Lookup takes),
// with all its tags and digests, as containerd's RemoveImage does; its
// layers go unless another image or a hold uses them. An unknown image is
// an error wrapping ErrNotFound (the CRI's RemoveImage makes that success).
func (s *Store) Remove(id string) error {
	s.mu.Lock()
	im := s.lookupLocked(id)
	if im == nil {
		s.mu.Unlock()
		return fmt.Errorf("remove image %s: %w", id, ErrNotFound)
	}
	delete(s.images, im.ID)
	if err := s.saveLocked(); err != nil {
		s.images[im.ID] = im
		s.mu.Unlock()
		return fmt.Errorf("remove image %s: %w", id, err)
	}
	trash := s.collectLocked(im.Layers)
	s.mu.Unlock()
	s.log.Info().Str("image", im.ID).Strs("tags", im.RepoTags).Msg("image removed")
	s.removeTrash(trash)
	return nil
}

// Hold records that holder (a container id) uses the image id names: its
// layers stay until Release(holder), even if the image is removed. A
// holder holds one image; holding another releases the first. Holds are
// in images.json, so they outlast a restart.
func (s *Store) Hold(holder, id string) (*Image, error) {
	if holder == "" {
		return nil, fmt.Errorf("hold image %s: no holder given", id)
	}
	s.mu.Lock()
	im := s.lookupLocked(id)
	if im == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("hold image %s for %s: %w", id, holder, ErrNotFound)
	}
	old := s.holds[holder]
	h := &hold{Image: im.ID, Layers: slices.Clone(im.Layers)}
	s.holds[holder] = h // its layers are not collected from now on
	c := im.clone()
	s.mu.Unlock()
	if err := s.writeHold(holder, h); err != nil {
		s.mu.Lock()
		if old != nil {
			s.holds[holder] = old
		} else {
			delete(s.holds, holder)
		}
		trash := s.collectLocked(h.Layers)
		s.mu.Unlock()
		s.removeTrash(trash)
		return nil, fmt.Errorf("hold image %s for %s: %w", id, holder, err)
	}
	if old != nil {
		s.mu.Lock()
		trash := s.collectLocked(old.Layers)
		s.mu.Unlock()
		s.removeTrash(trash)
	}
	return c, nil
}

// Release ends holder's hold; the layers it kept go unless something else
// uses them. Releasing a holder that holds nothing is not an error.
func (s *Store) Release(holder string) error {
	s.mu.Lock()
	h, ok := s.holds[holder]
	if !ok {
		s.mu.Unlock()
		return nil
	}
	delete(s.holds, holder)
	s.mu.Unlock()
	// The hold's file goes first: a crash after it leaves layers that the
	// next Open collects, never a hold on layers that are gone.
	if err := s.removeHold(holder); err != nil {
		s.mu.Lock()
		if s.holds[holder] == nil {
			s.holds[holder] = h
		}
		s.mu.Unlock()
		return fmt.Errorf("release image %s held by %s: %w", h.Image, holder, err)
	}
	s.mu.Lock()
	trash := s.collectLocked(h.Layers)
	s.mu.Unlock()
	s.removeTrash(trash)
	return nil
}

// holdPath is the file of holder's hold.
func (s *Store) holdPath(holder string) string {
	return filepath.Join(s.dir, holdsDir, hex.EncodeToString([]byte(holder))+".json")
}

// writeHold records holder's hold durably.
func (s *Store) writeHold(holder string, h *hold) error {
	if err := os.MkdirAll(filepath.Join(s.dir, holdsDir), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteJSON(s.holdPath(holder), holdFile{Holder: holder, hold: *h})
}

// removeHold removes holder's hold file, durably.
func (s *Store) removeHold(holder string) error {
	if err := os.Remove(s.holdPath(holder)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	d, err := os.Open(filepath.Join(s.dir, holdsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// loadHolds reads the hold files into s.holds; with legacy (holds read
// from images.json) it writes those as files and images.json without them.
// Called by Open alone.
func (s *Store) loadHolds(legacy bool) error {
	paths, err := filepath.Glob(filepath.Join(s.dir, holdsDir, "*.json"))
	if err != nil {
		return err
	}
	for _, p := range paths {
		var f holdFile
		if err := atomicfile.ReadJSON(p, &f); err != nil {
			return fmt.Errorf("hold %s: %w", filepath.Base(p), err)
		}
		if f.Holder == "" || s.holdPath(f.Holder) != p || slices.ContainsFunc(f.Layers, invalidID) {
			continue // not written by writeHold: not trusted
		}
		s.holds[f.Holder] = &f.hold
	}
	if !legacy {
		return nil
	}
	for holder, h := range s.holds {
		if err := s.writeHold(holder, h); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saveLocked()
}

// LayerDirs returns the absolute unpacked layer directories of im, top
// layer first (overlayfs lowerdir order). A layer the image has twice is
// listed once, where it is topmost: overlayfs refuses a lowerdir given
// twice (ELOOP), and the merged tree is the same, since every path of the
// lower copy is also in the upper one, which wins.
func (s *Store) LayerDirs(im *Image) []string {
	dirs := make([]string, 0, len(im.Layers))
	seen := make(map[string]bool, len(im.Layers))
	for i := len(im.Layers) - 1; i >= 0; i-- {
		if d := im.Layers[i]; !seen[d] {
			seen[d] = true
			dirs = append(dirs, s.layerDir(d))
		}
	}
	return dirs
}

// layerDir is where the layer with diffID ("sha256:<hex>") is unpacked.
func (s *Store) layerDir(diffID string) string {
	return filepath.Join(s.layersDir, strings.TrimPrefix(diffID, "sha256:"))
}

func (s *Store) isPinned(im *Image) bool {
	for _, n := range im.RepoTags {
		if s.pinned[n] {
			return true
		}
	}
	for _, n := range im.RepoDigests {
		if s.pinned[n] {
			return true
		}
	}
	return false
}

// inUseLocked reports whether an image, a hold, or a running pull or
// import uses the layer diffID. s.mu must be held.
func (s *Store) inUseLocked(diffID string) bool {
	if s.pending[diffID] > 0 {
		return true
	}
	for _, im := range s.images {
		if slices.Contains(im.Layers, diffID) {
			return true
		}
	}
	for _, h := range s.holds {
		if slices.Contains(h.Layers, diffID) {
			return true
		}
	}
	return false
}

// collectLocked moves the layers among diffIDs that nothing uses any more
// out of the way (renamed to layers/.rm-*, so no later lookup sees them)
// and returns where they went, for removeTrash to delete without the lock.
// s.mu must be held.
func (s *Store) collectLocked(diffIDs []string) []string {
	var trash []string
	seen := make(map[string]bool)
	for _, d := range diffIDs {
		if seen[d] || s.inUseLocked(d) {
			continue
		}
		seen[d] = true
		delete(s.usage, d)
		dir := s.layerDir(d)
		s.trashSeq++
		tmp := filepath.Join(s.layersDir, fmt.Sprintf(".rm-%d-%s", s.trashSeq, filepath.Base(dir)))
		if err := os.Rename(dir, tmp); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.log.Error().Err(err).Str("layer", d).Msg("remove unused layer")
			}
			continue
		}
		trash = append(trash, tmp)
	}
	return trash
}

func (s *Store) removeTrash(trash []string) {
	for _, p := range trash {
		if err := os.RemoveAll(p); err != nil {
			s.log.Error().Err(err).Str("dir", p).Msg("remove unused layer")
		}
	}
}

// saveLocked writes images.json atomically. s.mu must be held.
func (s *Store) saveLocked() error {
	rec := records{Images: make([]*Image, 0, len(s.images))}
	for _, im := range s.images {
		rec.Images = append(rec.Images, im)
	}
	slices.SortFunc(rec.Images, func(a, b *Image) int { return strings.Compare(a.ID, b.ID) })
	return atomicfile.WriteJSON(filepath.Join(s.dir, recordsFile), rec)
}

// validID reports whether id is "sha256:" and 64 lower-case hex digits.
func validID(id string) bool {
	hex, ok := strings.CutPrefix(id, "sha256:")
	return ok && validHex(hex)
}

func invalidID(id string) bool { return !validID(id) }

func validHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
