// Package pullmanager is kubelet's image pull manager
// (pkg/kubelet/images/pullmanager, KEP-2535 "ensure secret pulled images"):
// it records which credentials pulled each image, so that a pod may use an
// image already on the node only if it could have pulled it itself. Without
// it, a pod with no credentials runs a private image another tenant's pod
// pulled, under pull policy IfNotPresent or Never.
//
// The records are kubelet's files, in kubelet's format: an ImagePullIntent
// per pull under way and an ImagePulledRecord per image ID, keyed by the
// sha256 of the image or image ID. A pull secret is recorded by namespace,
// name, uid and a sha256 of the credential it gave; never its value.
package pullmanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// ErrInvalidConfig wraps every Config.Validate failure.
var ErrInvalidConfig = errors.New("invalid image pull manager config")

// DirName is the records' directory in the node's data dir, kubelet's
// <root-dir>/image_manager.
const DirName = "image_manager"

// writeWhileMatchingLimit is kubelet's writeRecordWhileMatchingLimit: past
// this many secrets for one image, a match does not add the pod's secret
// to the record (high namespace turnover must not grow it without bound).
const writeWhileMatchingLimit = 100

// Config configures a Manager. Dir is required.
type Config struct {
	// Dir holds the records: <data-dir>/image_manager.
	Dir string
	// Policy is the credential verification policy. Default DefaultPolicy.
	Policy Policy
	// Allowlist is NeverVerifyAllowlistedImages' list of images (full
	// names without tag or digest) and prefixes ending in "/*", kubelet's
	// preloadedImagesVerificationAllowlist. Only with that policy.
	Allowlist []string
	// Now stamps records. Default time.Now.
	Now func() time.Time
	// Logger is used with component=pullmanager.
	Logger zerolog.Logger
}

// Validate reports the first problem of cfg, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	if c.Dir == "" || !filepath.IsAbs(c.Dir) {
		return bad("Dir %q must be an absolute path", c.Dir)
	}
	if err := CheckPolicy(c.Policy, c.Allowlist); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// CheckPolicy reports what is wrong with a policy and its allowlist: an
// unknown policy, an allowlist with another policy than
// NeverVerifyAllowlistedImages, or a pattern kubelet refuses.
func CheckPolicy(p Policy, allowlist []string) error {
	if _, err := ParsePolicy(string(p)); err != nil {
		return err
	}
	if len(allowlist) > 0 && p != NeverVerifyAllowlistedImages {
		return fmt.Errorf("an allowlist is for policy %s only, not %s", NeverVerifyAllowlistedImages, p)
	}
	_, err := parseAllowlist(allowlist)
	return err
}

// Manager is kubelet's PullManager. It is safe for concurrent use: mu
// guards the files and intents, as kubelet's striped locks do (pulls are
// few; one lock is enough).
type Manager struct {
	policy    Policy
	allowlist allowlist
	now       func() time.Time
	log       zerolog.Logger

	mu      sync.Mutex
	store   recordStore    // guarded by mu
	intents map[string]int // guarded by mu: pulls under way per image
}

// New returns a Manager. It does no I/O; Initialize reads what a previous
// run left.
func New(cfg Config) (*Manager, error) {
	if cfg.Policy == "" {
		cfg.Policy = DefaultPolicy
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a, _ := parseAllowlist(cfg.Allowlist)
	return &Manager{
		policy:    cfg.Policy,
		allowlist: a,
		now:       cfg.Now,
		log:       cfg.Logger.With().Str("component", "pullmanager").Logger(),
		store:     newRecordStore(cfg.Dir),
		intents:   map[string]int{},
	}, nil
}

// ImageLister lists the runtime's images.
type ImageLister interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// Initialize turns the intents a previous run left into pulled records
// without credentials for the images the runtime holds, as kubelet's
// initialize: the pull may have finished after jetlet stopped, with
// credentials it never recorded, so a pod must prove it may use such an
// image. Call it once, before any pull.
func (m *Manager) Initialize(ctx context.Context, images ImageLister) {
	m.mu.Lock()
	defer m.mu.Unlock()
	intents, err := m.store.listIntents()
	if err != nil {
		m.log.Error().Err(err).Msg("some image pull intents cannot be read; going on without them")
	}
	if len(intents) == 0 {
		return
	}
	list, err := images.ListImages(ctx, nil)
	if err != nil {
		m.log.Error().Err(err).Msg("cannot list images to settle the image pull intents of the last run")
		return
	}
	// An intent names the image as the pod wrote it ("busybox:1.36"), the
	// runtime in full ("docker.io/library/busybox:1.36"): both normalised.
	pulling := map[string][]string{}
	for _, in := range intents {
		if ref, err := imageref.Normalize(in.Image); err == nil {
			pulling[ref] = append(pulling[ref], in.Image)
		}
	}
	for _, img := range list {
		for _, name := range slices.Concat(img.RepoDigests, img.RepoTags) {
			ref, err := imageref.Normalize(name)
			if err != nil {
				continue
			}
			for _, image := range pulling[ref] {
				if err := m.writePulledLocked(image, img.Id, nil); err != nil {
					m.log.Error().Err(err).Str("image_ref", img.Id).Msg("cannot write an image pulled record")
					continue
				}
				if err := m.store.deleteIntent(image); err != nil {
					m.log.Warn().Err(err).Str("image", image).Msg("cannot remove an image pull intent")
				}
			}
		}
	}
}

// RecordPullIntent records that image is about to be pulled.
func (m *Manager) RecordPullIntent(image string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.store.writeIntent(image); err != nil {
		return fmt.Errorf("failed to record image pull intent: %w", err)
	}
	m.intents[image]++
	return nil
}

// RecordImagePulled records that image, now imageRef, was pulled with creds
// (nil: unknown, so that every pod must prove it may use it).
func (m *Manager) RecordImagePulled(image, imageRef string, creds *ImagePullCredentials) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writePulledLocked(image, imageRef, creds); err != nil {
		// The intent stays, as kubelet's: the next start turns it into a
		// record without credentials.
		m.log.Error().Err(err).Str("image_ref", imageRef).Msg("failed to write image pulled record")
		return
	}
	m.decrementIntentLocked(image)
}

// RecordImagePullFailed records that a pull of image ended without it.
func (m *Manager) RecordImagePullFailed(image string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decrementIntentLocked(image)
}

func (m *Manager) decrementIntentLocked(image string) {
	if m.intents[image] > 1 {
		m.intents[image]--
		return
	}
	if err := m.store.deleteIntent(image); err != nil {
		m.log.Error().Err(err).Str("image", image).Msg("failed to remove image pull intent")
		return
	}
	delete(m.intents, image)
}

// writePulledLocked merges creds for image into imageRef's record, as
// kubelet's writePulledRecordIfChanged: the record's mere existence makes
// the image jetlet-pulled; credentials are recorded per image name.
func (m *Manager) writePulledLocked(image, imageRef string, creds *ImagePullCredentials) error {
	name, err := imageName(image)
	if err != nil {
		return fmt.Errorf("invalid image name %q: %w", image, err)
	}
	rec, err := m.store.pulledRecord(imageRef)
	if err != nil {
		m.log.Info().Err(err).Str("image", image).Msg("failed to read an image pulled record; writing it anew")
		rec = nil
	}
	if rec == nil {
		rec = &ImagePulledRecord{ImageRef: imageRef, CredentialMapping: map[string]ImagePullCredentials{}}
		if creds != nil {
			rec.CredentialMapping[name] = *creds
		}
	} else if !mergeCredentials(rec, name, creds) {
		return nil
	}
	rec.LastUpdatedTime = metav1.NewTime(m.now())
	return m.store.writePulledRecord(rec)
}

// mergeCredentials adds creds to rec's entry for name, as kubelet's
// pulledRecordMergeNewCreds; false when nothing changed. NodePodsAccessible
// wins over any secret: the image is everyone's.
func mergeCredentials(rec *ImagePulledRecord, name string, creds *ImagePullCredentials) bool {
	if creds == nil || (!creds.NodePodsAccessible && len(creds.KubernetesSecrets) == 0 && len(creds.KubernetesServiceAccounts) == 0) {
		return false
	}
	if rec.CredentialMapping == nil {
		rec.CredentialMapping = map[string]ImagePullCredentials{}
	}
	cur, found := rec.CredentialMapping[name]
	switch {
	case !found:
		cur = *creds
	case cur.NodePodsAccessible:
		return false
	case creds.NodePodsAccessible:
		cur = ImagePullCredentials{NodePodsAccessible: true}
	case len(creds.KubernetesSecrets) > 0:
		var changed bool
		if cur.KubernetesSecrets, changed = mergeSecrets(cur.KubernetesSecrets, creds.KubernetesSecrets); !changed {
			return false
		}
	default:
		var changed bool
		if cur.KubernetesServiceAccounts, changed = mergeServiceAccounts(cur.KubernetesServiceAccounts, creds.KubernetesServiceAccounts); !changed {
			return false
		}
	}
	rec.CredentialMapping[name] = cur
	return true
}

type secretCoordinates struct{ uid, namespace, name string }

// mergeSecrets adds the new secrets to orig, one per (namespace, name,
// uid), a new hash replacing an old one; sorted by namespace, name, uid.
func mergeSecrets(orig, add []ImagePullSecret) ([]ImagePullSecret, bool) {
	hashes := map[secretCoordinates]string{}
	for _, s := range orig {
		hashes[secretCoordinates{s.UID, s.Namespace, s.Name}] = s.CredentialHash
	}
	changed := false
	for _, s := range add {
		key := secretCoordinates{s.UID, s.Namespace, s.Name}
		if h, ok := hashes[key]; !ok || h != s.CredentialHash {
			hashes[key] = s.CredentialHash
			changed = true
		}
	}
	if !changed {
		return orig, false
	}
	out := make([]ImagePullSecret, 0, len(hashes))
	for k, h := range hashes {
		out = append(out, ImagePullSecret{UID: k.uid, Namespace: k.namespace, Name: k.name, CredentialHash: h})
	}
	slices.SortFunc(out, func(a, b ImagePullSecret) int {
		return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.UID, b.Namespace+"\x00"+b.Name+"\x00"+b.UID)
	})
	return out, true
}

func mergeServiceAccounts(orig, add []ImagePullServiceAccount) ([]ImagePullServiceAccount, bool) {
	out := slices.Clone(orig)
	for _, sa := range add {
		if !slices.Contains(out, sa) {
			out = append(out, sa)
		}
	}
	if len(out) == len(orig) {
		return orig, false
	}
	slices.SortFunc(out, func(a, b ImagePullServiceAccount) int {
		return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.UID, b.Namespace+"\x00"+b.Name+"\x00"+b.UID)
	})
	return out, true
}

// MustAttemptImagePull says whether a pod whose pull secrets for image are
// podSecrets' must pull image (present as imageRef) before it may use it,
// as kubelet's: the policy says whether to verify; then only a recorded
// NodePodsAccessible pull, or a pod secret matching a recorded one (same
// credential hash, or the same secret, by uid, whose credential changed)
// lets the pod use the image as it is. A record that cannot be read means
// a pull.
func (m *Manager) MustAttemptImagePull(image, imageRef string, podSecrets func() []ImagePullSecret) bool {
	if imageRef == "" {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, err := m.store.pulledRecord(imageRef)
	if err != nil {
		m.log.Error().Err(err).Str("image_ref", imageRef).Msg("unable to read the records of image pulls; the pod must pull the image")
		return true
	}
	pulledByJetlet := rec != nil || m.intents[image] > 0
	if !pulledByJetlet {
		if pulledByJetlet, err = m.store.intentExists(image); err != nil {
			m.log.Error().Err(err).Str("image", image).Msg("unable to read the records of image pulls; the pod must pull the image")
			return true
		}
	}
	if !m.requireVerification(image, pulledByJetlet) {
		return false
	}
	if rec == nil {
		return true
	}
	name, err := imageName(image)
	if err != nil {
		return true
	}
	cached, ok := rec.CredentialMapping[name]
	switch {
	case !ok:
		return true
	case cached.NodePodsAccessible:
		return false
	}
	if len(cached.KubernetesSecrets) == 0 {
		return true
	}
	// Read only now, as kubelet's getPodCredentials: most images need not.
	for _, pod := range podSecrets() {
		for _, c := range cached.KubernetesSecrets {
			hashMatch := c.CredentialHash != "" && pod.CredentialHash == c.CredentialHash
			// A Secret without a uid (jetlet's Secrets need none) may have
			// been made anew under its name: only its credential tells.
			sameSecret := pod.UID != "" && pod.UID == c.UID && pod.Namespace == c.Namespace && pod.Name == c.Name
			room := len(cached.KubernetesSecrets) < writeWhileMatchingLimit
			switch {
			case hashMatch:
				if !sameSecret && room {
					// Another secret with the same credential: remember it.
					m.addSecretLocked(image, imageRef, pod)
				}
				return false
			case sameSecret && room:
				// The secret's credential changed: remember the new one.
				m.addSecretLocked(image, imageRef, pod)
				return false
			}
		}
	}
	return true
}

// PruneUnknownRecords removes the pulled records of images the runtime no
// longer holds (inUse are the IDs it holds), except those written since
// until, which the listing may predate (kubelet's image GC prunes so).
func (m *Manager) PruneUnknownRecords(inUse []string, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	recs, err := m.store.listPulledRecords()
	if err != nil {
		m.log.Error().Err(err).Msg("some image pulled records cannot be read; pruning the others")
	}
	for _, rec := range recs {
		if !rec.LastUpdatedTime.Time.Before(until) || slices.Contains(inUse, rec.ImageRef) {
			continue
		}
		if err := m.store.deletePulledRecord(rec.ImageRef); err != nil {
			m.log.Error().Err(err).Str("image_ref", rec.ImageRef).Msg("failed to remove an image pulled record")
		}
	}
}

func (m *Manager) addSecretLocked(image, imageRef string, s ImagePullSecret) {
	if err := m.writePulledLocked(image, imageRef, &ImagePullCredentials{KubernetesSecrets: []ImagePullSecret{s}}); err != nil {
		m.log.Error().Err(err).Str("image_ref", imageRef).Msg("failed to write an image pulled record")
	}
}

// CredentialHash is the hash recorded for a credential, a sha256 of its
// JSON as kubelet's hashAuthConfig: it tells two credentials apart and
// cannot be turned back into one.
func CredentialHash(auth *runtimeapi.AuthConfig) string {
	data, _ := json.Marshal(struct {
		Username      string `json:"username,omitempty"`
		Password      string `json:"password,omitempty"`
		Auth          string `json:"auth,omitempty"`
		ServerAddress string `json:"serveraddress,omitempty"`
		IdentityToken string `json:"identitytoken,omitempty"`
		RegistryToken string `json:"registrytoken,omitempty"`
	}{auth.GetUsername(), auth.GetPassword(), auth.GetAuth(), auth.GetServerAddress(), auth.GetIdentityToken(), auth.GetRegistryToken()})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
