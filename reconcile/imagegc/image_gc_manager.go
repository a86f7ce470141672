package imagegc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/periodic"
)

// ImageGCPeriod is how often Run collects, kubelet's ImageGCPeriod.
const ImageGCPeriod = 5 * time.Minute

// Clock is the time source of the records and of the ages; tests inject one.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Config configures an ImageGCManager.
type Config struct {
	Policy Policy
	// Clock defaults to the wall clock.
	Clock Clock
	// PullRecords, when set, forgets the pull records of images the runtime
	// no longer holds at each detection (kubelet's image GC prunes its
	// image pull manager's).
	PullRecords PullRecordPruner
	Logger      zerolog.Logger
}

// PullRecordPruner removes the records of image IDs not in ids, except
// those written since until (pullmanager.Manager).
type PullRecordPruner interface {
	PruneUnknownRecords(ids []string, until time.Time)
}

// ImageGCManager is kubelet's image garbage collector (realImageGCManager)
// over a CRI runtime. Its methods may be called from several goroutines:
// collections (GarbageCollect, DeleteUnusedImages, Run's passes) take turns.
type ImageGCManager struct {
	rt          ImageGCRuntime
	policy      Policy
	clock       Clock
	pullRecords PullRecordPruner // nil: none
	log         zerolog.Logger
	// began is when the manager was made, jetlet's start: MaxAge counts
	// from it at the earliest.
	began time.Time
	// statfs measures the image file system (tests replace it).
	statfs func(path string) (filesystemStats, error)

	// collecting is held through a collection, so that two never remove the
	// same images and count their bytes twice.
	collecting sync.Mutex

	mu sync.Mutex // guards records
	// records is every image the last detection listed, by id.
	records map[string]*imageRecord

	nodeImagesMu sync.Mutex // guards lastNodeImages and nodeImagesListed
	// lastNodeImages is NodeImages' last answer, repeated until it is
	// nodeImagesRefresh old and while the runtime cannot list; listed when.
	lastNodeImages   []corev1.ContainerImage
	nodeImagesListed time.Time
}

// New returns a manager of rt's images under cfg's policy, which it
// validates. It does no I/O: Run starts the collections.
func New(rt ImageGCRuntime, cfg Config) (*ImageGCManager, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	return &ImageGCManager{
		rt:          rt,
		policy:      cfg.Policy,
		clock:       cfg.Clock,
		pullRecords: cfg.PullRecords,
		log:         cfg.Logger.With().Str("component", "imagegc").Logger(),
		began:       cfg.Clock.Now(),
		statfs:      statfs,
		records:     map[string]*imageRecord{},
	}, nil
}

// Run collects at once and then every ImageGCPeriod until ctx is done, as
// kubelet's image GC loop. A failure is logged as kubelet logs it: the
// first as a possibly passing one, those in a row after it with kubelet's
// event reason ImageGCFailed. When the policy collects nothing (high
// threshold 100, no maximum age) it only detects images, so that
// DeleteUnusedImages knows their ages.
func (m *ImageGCManager) Run(ctx context.Context) {
	pass := m.detectAndLog
	if m.policy.collects() {
		pass = m.collectAndLog()
	} else {
		m.log.Info().Msg("Image garbage collection is off (--image-gc-high-threshold 100, --image-maximum-gc-age 0): images are only tracked")
	}
	pass(ctx)
	periodic.Every(ctx, ImageGCPeriod, func() { pass(ctx) })
}

// collectAndLog returns Run's pass: one GarbageCollect, logged as kubelet's
// loop logs it.
func (m *ImageGCManager) collectAndLog() func(context.Context) {
	failedBefore := false // whether the last pass failed; Run's goroutine alone uses it
	return func(ctx context.Context) {
		err := m.GarbageCollect(ctx)
		switch {
		case err != nil && failedBefore:
			m.log.Error().Err(err).Str("reason", "ImageGCFailed").Msg("Image garbage collection failed multiple times in a row")
		case err != nil:
			m.log.Error().Err(err).Msg("Image garbage collection failed once. Stats initialization may not have completed yet")
		case failedBefore:
			m.log.Info().Msg("Image garbage collection succeeded")
		default:
			m.log.Debug().Msg("Image garbage collection succeeded")
		}
		failedBefore = err != nil
	}
}

// detectAndLog is one detection of the images, logged as kubelet's image
// monitoring loop logs a failed one.
func (m *ImageGCManager) detectAndLog(ctx context.Context) {
	m.collecting.Lock()
	defer m.collecting.Unlock()
	if _, err := m.detectImages(ctx, m.clock.Now()); err != nil {
		m.log.Warn().Err(err).Msg("Failed to monitor images")
	}
}

// GarbageCollect applies the policy once, as kubelet's GarbageCollect:
//
//  1. detect the images; those neither in use nor pinned are candidates,
//     least recently used first;
//  2. with a MaxAge, and once jetlet has run longer than it, remove the
//     candidates unused for longer than MaxAge;
//  3. when the image file system's usage is at or above the high threshold,
//     remove candidates at least MinAge old, in order, until the bytes for
//     the low threshold are freed.
//
// Removals go on past errors, which are returned joined. Not freeing enough
// is an error (kubelet's FreeDiskSpaceFailed).
func (m *ImageGCManager) GarbageCollect(ctx context.Context) error {
	m.collecting.Lock()
	defer m.collecting.Unlock()
	now := m.clock.Now()
	candidates, err := m.imagesInEvictionOrder(ctx, now)
	if err != nil {
		return err
	}
	expired, candidates := expiredImages(candidates, now, m.began, m.policy.MaxAge)
	if _, failed := m.removeImages(ctx, expired, math.MaxInt64); len(failed) > 0 {
		return fmt.Errorf("wanted to free images older than %s, encountered errors in image deletion: %w", m.policy.MaxAge, errors.Join(failed...))
	}

	fs, err := m.imageFs(ctx)
	if err != nil {
		return err
	}
	usage, bytesToFree, err := spaceToFree(fs, m.policy)
	if err != nil || bytesToFree == 0 {
		return err
	}
	m.log.Info().Int("usage", usage).Int("highThreshold", m.policy.HighThresholdPercent).
		Int("lowThreshold", m.policy.LowThresholdPercent).Int64("amountToFree", bytesToFree).
		Msg("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold")
	freed, err := m.freeSpace(ctx, bytesToFree, now, candidates)
	if err != nil {
		return err
	}
	if freed < bytesToFree {
		return fmt.Errorf("failed to garbage collect required amount of images: attempted to free %d bytes, but only found %d bytes eligible to free", bytesToFree, freed)
	}
	return nil
}

// DeleteUnusedImages removes every image neither in use nor pinned that is
// at least MinAge old, for the eviction manager's reclaim of disk, and
// returns the bytes the removed images took (by the runtime's sizes).
func (m *ImageGCManager) DeleteUnusedImages(ctx context.Context) (freed int64, err error) {
	m.collecting.Lock()
	defer m.collecting.Unlock()
	m.log.Info().Msg("Attempting to delete unused images")
	now := m.clock.Now()
	candidates, err := m.imagesInEvictionOrder(ctx, now)
	if err != nil {
		return 0, err
	}
	return m.freeSpace(ctx, math.MaxInt64, now, candidates)
}

// freeSpace removes the candidates at least MinAge old, in order, until
// bytesToFree are freed, and returns what it freed.
func (m *ImageGCManager) freeSpace(ctx context.Context, bytesToFree int64, now time.Time, candidates []candidate) (int64, error) {
	freed, failed := m.removeImages(ctx, oldEnough(candidates, now, m.policy.MinAge), bytesToFree)
	if len(failed) > 0 {
		return freed, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", bytesToFree, freed, errors.Join(failed...))
	}
	return freed, nil
}

// removeImages removes images in order until enough bytes are freed, going
// on past a failed removal, and returns the bytes freed and the failures.
func (m *ImageGCManager) removeImages(ctx context.Context, images []candidate, enough int64) (freed int64, failed []error) {
	for _, im := range images {
		if freed >= enough {
			break
		}
		m.log.Info().Str("imageID", im.id).Int64("size", im.size).Msg("Removing image to free bytes")
		if err := m.rt.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: im.id}); err != nil {
			failed = append(failed, fmt.Errorf("remove image %s: %w", im.id, err))
			continue
		}
		m.mu.Lock()
		delete(m.records, im.id)
		m.mu.Unlock()
		freed += im.size
	}
	return freed, failed
}
