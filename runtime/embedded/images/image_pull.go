package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// Auth is a registry credential, as the CRI's AuthConfig.
type Auth struct {
	Username      string
	Password      string
	Auth          string // base64 of "username:password"
	IdentityToken string
	RegistryToken string
}

func (a *Auth) empty() bool {
	return a == nil || *a == Auth{}
}

// MarshalZerologObject logs who the credential is for, never the secrets.
func (a *Auth) MarshalZerologObject(e *zerolog.Event) {
	e.Str("username", a.Username)
}

// String hides the secrets.
func (a Auth) String() string { return fmt.Sprintf("{Username:%s <credentials>}", a.Username) }

// MarshalJSON hides the secrets.
func (a Auth) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"username": a.Username, "credentials": "<redacted>"})
}

// GoString hides the secrets.
func (a Auth) GoString() string { return a.String() }

// platform is what a pull picks from an index.
var platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// layerJobs is how many layers of one pull are fetched at once
// (containerd's max_concurrent_downloads).
const layerJobs = 3

// Pull fetches ref (normalised first) through the registry API, with auth
// (anonymous when nil), picking linux/GOARCH from an index, and records it:
// the image's layers not yet in the store are fetched and unpacked, the
// reference becomes the image's (taken from any image that had it). Pulls
// of one reference with the same credentials at once are one pull; a layer
// needed by pulls at once is fetched once; a layer already unpacked is not
// fetched. A pull whose every caller gave up (ctx) stops and leaves nothing:
// no record, no layer it had unpacked that nothing else uses.
//
// A registry answering "no such image" gives an error wrapping ErrNotFound;
// one refusing the credentials, ErrUnauthorized. Errors name the reference
// and never carry the credentials.
func (s *Store) Pull(ctx context.Context, ref string, auth *Auth) (*Image, error) {
	r, err := imageref.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	key := r.String() + "\x00" + authKey(auth)
	im, err := s.pulls.do(ctx, key, func(ctx context.Context) (*Image, error) {
		return s.pull(ctx, r, auth)
	})
	if err != nil {
		return nil, newPullError(r.String(), err, auth)
	}
	return im.clone(), nil
}

// authKey tells credentials apart without keeping them in a map key.
func authKey(a *Auth) string {
	if a.empty() {
		return ""
	}
	h := sha256.New()
	for _, f := range []string{a.Username, a.Password, a.Auth, a.IdentityToken, a.RegistryToken} {
		fmt.Fprintf(h, "%d:%s", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Store) pull(ctx context.Context, r imageref.Reference, auth *Auth) (*Image, error) {
	log := s.log.With().Str("image", r.String()).Logger()
	start := time.Now()
	if s.mirror != "" && !strings.EqualFold(s.mirror, r.Domain) {
		// The mirror is anonymous: the credentials are the registry's.
		im, err := s.pullFrom(ctx, r, s.mirror, nil)
		if err == nil {
			log.Info().Str("id", im.ID).Str("mirror", s.mirror).Dur("took", time.Since(start)).Msg("image pulled")
			return im, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		ev := log.Warn()
		if errors.Is(newPullError(r.String(), err, nil), ErrNotFound) {
			ev = log.Debug()
		}
		ev.Str("mirror", s.mirror).Str("error", err.Error()).Msg("pull from the mirror failed; pulling from the registry")
	}
	im, err := s.pullFrom(ctx, r, r.Domain, auth)
	if err != nil {
		return nil, err
	}
	log.Info().Str("id", im.ID).Dur("took", time.Since(start)).Msg("image pulled")
	return im, nil
}

// pullFrom pulls r from host, the reference's registry or the mirror.
func (s *Store) pullFrom(ctx context.Context, r imageref.Reference, host string, auth *Auth) (*Image, error) {
	var nameOpts []name.Option
	if s.plainHTTP(host) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	src := host + "/" + r.Path + ":" + r.Tag
	if r.Digest != "" {
		src = host + "/" + r.Path + "@" + r.Digest
	}
	gref, err := name.ParseReference(src, nameOpts...)
	if err != nil {
		return nil, err
	}
	rt := &registryTransport{base: s.transport, plainHTTP: s.plainHTTP}
	if host != r.Domain {
		rt.mirror, rt.ns = host, r.Domain
	}
	var authenticator authn.Authenticator = authn.Anonymous
	if !auth.empty() {
		authenticator = authn.FromConfig(authn.AuthConfig{
			Username:      auth.Username,
			Password:      auth.Password,
			Auth:          auth.Auth,
			IdentityToken: auth.IdentityToken,
			RegistryToken: auth.RegistryToken,
		})
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(rt),
		remote.WithAuth(authenticator),
		remote.WithPlatform(platform),
		remote.WithUserAgent("jetlet"),
	}
	desc, err := remote.Get(gref, opts...)
	if err != nil {
		return nil, err
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	names := []string{r.String()}
	if r.Tag != "" {
		names = append(names, r.Repo()+"@"+desc.Digest.String())
	}
	return s.store(ctx, img, manifestSize(m), names)
}

// store unpacks the layers of img (a pulled or imported image of size
// bytes, config and layers as stored where it came from) that the store
// lacks, and records it under names. Only the config and the layers are
// read from img: an image of a `docker save` archive makes its manifest
// only by compressing every layer.
func (s *Store) store(ctx context.Context, img v1.Image, size uint64, names []string) (*Image, error) {
	configName, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	id := configName.String()
	if !validID(id) {
		return nil, fmt.Errorf("config digest %s: not sha256", id)
	}
	im := s.Lookup(id)
	if im == nil {
		raw, err := img.RawConfigFile()
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", id, err)
		}
		if got := sha256.Sum256(raw); hex.EncodeToString(got[:]) != configName.Hex {
			return nil, fmt.Errorf("config %s: content does not match its digest", id)
		}
		cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", id, err)
		}
		im = &Image{ID: id, Size: size, Config: configOf(cf)}
		for _, d := range cf.RootFS.DiffIDs {
			if d.Algorithm != "sha256" || !validHex(d.Hex) {
				return nil, fmt.Errorf("config %s: bad diff id %q", id, d)
			}
			im.Layers = append(im.Layers, d.String())
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", id, err)
	}
	if len(layers) != len(im.Layers) {
		return nil, fmt.Errorf("image %s: %d layers, the config lists %d", id, len(layers), len(im.Layers))
	}
	s.pend(im.Layers)
	defer s.unpend(im.Layers)
	if err := s.ensureLayers(ctx, im.Layers, layers); err != nil {
		return nil, fmt.Errorf("image %s: %w", id, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.record(im, names)
}

// manifestSize is the compressed size of the config and layers, as
// containerd reports an image's.
func manifestSize(m *v1.Manifest) uint64 {
	size := uint64(max(m.Config.Size, 0))
	for _, l := range m.Layers {
		size += uint64(max(l.Size, 0))
	}
	return size
}

// record adds im (its record when new) with names, taking each name from
// any other image that had it.
func (s *Store) record(im *Image, names []string) (*Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, known := s.images[im.ID]
	if !known {
		cur = im.clone()
		cur.RepoTags, cur.RepoDigests = nil, nil
	}
	before := make(map[string]*Image)
	for _, n := range names {
		for id, other := range s.images {
			if id != im.ID && other.hasName(n) {
				if _, ok := before[id]; !ok {
					before[id] = other.clone()
				}
				other.dropName(n)
				other.Pinned = s.isPinned(other)
			}
		}
	}
	old := cur.clone()
	for _, n := range names {
		cur.addName(n)
	}
	cur.Pinned = s.isPinned(cur)
	s.images[im.ID] = cur
	if err := s.saveLocked(); err != nil {
		for id, other := range before {
			s.images[id] = other
		}
		if known {
			s.images[im.ID] = old
		} else {
			delete(s.images, im.ID)
		}
		return nil, fmt.Errorf("record image %s: %w", im.ID, err)
	}
	return cur.clone(), nil
}

// pend marks the layers as used by a pull or import that has not recorded
// them yet.
func (s *Store) pend(diffIDs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range diffIDs {
		s.pending[d]++
	}
}

// unpend ends pend: the layers that nothing else uses (the pull failed)
// are removed.
func (s *Store) unpend(diffIDs []string) {
	s.mu.Lock()
	for _, d := range diffIDs {
		if s.pending[d]--; s.pending[d] <= 0 {
			delete(s.pending, d)
		}
	}
	trash := s.collectLocked(diffIDs)
	s.mu.Unlock()
	s.removeTrash(trash)
}
