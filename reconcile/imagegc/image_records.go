package imagegc

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageRecord is what collection knows of an image, kubelet's imageRecord:
// kept in memory, so a restart sees every image first detected anew.
type imageRecord struct {
	// firstDetected is when a detection pass first listed the image.
	firstDetected time.Time
	// lastUsed is the last detection pass that found a container using it;
	// zero when none has.
	lastUsed time.Time
	size     int64
	// pinned: the runtime pins it (the sandbox image); never removed.
	pinned bool
}

// candidate is an image collection may remove: neither in use nor pinned.
type candidate struct {
	id string
	imageRecord
}

// detectImages lists the runtime's images and containers and updates the
// records at now: new images first detected, those in use last used, those
// gone forgotten, with their pull records written before now. It returns
// the ids of the images in use.
func (m *ImageGCManager) detectImages(ctx context.Context, now time.Time) (map[string]bool, error) {
	images, err := m.rt.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	if m.pullRecords != nil {
		ids := make([]string, len(images))
		for i, im := range images {
			ids[i] = im.GetId()
		}
		m.pullRecords.PruneUnknownRecords(ids, now)
	}
	containers, err := m.rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	inUse := imagesInUse(containers)

	m.mu.Lock()
	defer m.mu.Unlock()
	present := make(map[string]bool, len(images))
	for _, im := range images {
		id := im.GetId()
		present[id] = true
		r, ok := m.records[id]
		if !ok {
			r = &imageRecord{firstDetected: now}
			m.records[id] = r
		}
		if inUse[id] {
			r.lastUsed = now
		}
		r.size, r.pinned = int64(im.GetSize()), im.GetPinned()
	}
	for id := range m.records {
		if !present[id] {
			delete(m.records, id)
		}
	}
	return inUse, nil
}

// imagesInUse is the id of each container's image, as kubelet counts it:
// every container, whatever its state; the image id a runtime of CRI 1.30
// reports, else its image ref (which older runtimes set to the id).
func imagesInUse(containers []*runtimeapi.Container) map[string]bool {
	inUse := make(map[string]bool, len(containers))
	for _, c := range containers {
		id := c.GetImageId()
		if id == "" {
			id = c.GetImageRef()
		}
		inUse[id] = true
	}
	return inUse
}

// evictionOrder is the images that may be removed, least recently used
// first, ties broken by the earliest first detected (kubelet's
// byLastUsedAndDetected), then by id so that the order is stable.
func evictionOrder(records map[string]*imageRecord, inUse map[string]bool) []candidate {
	var out []candidate
	for id, r := range records {
		if inUse[id] || r.pinned {
			continue
		}
		out = append(out, candidate{id: id, imageRecord: *r})
	}
	slices.SortFunc(out, func(a, b candidate) int {
		return cmp.Or(a.lastUsed.Compare(b.lastUsed), a.firstDetected.Compare(b.firstDetected), cmp.Compare(a.id, b.id))
	})
	return out
}

// imagesInEvictionOrder detects the images at now and returns those that
// may be removed, in evictionOrder.
func (m *ImageGCManager) imagesInEvictionOrder(ctx context.Context, now time.Time) ([]candidate, error) {
	inUse, err := m.detectImages(ctx, now)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return evictionOrder(m.records, inUse), nil
}

// expiredImages splits candidates into those unused for longer than maxAge
// at now and the rest, keeping their order. None expires before maxAge has
// passed since began (jetlet's start): until then an image's lastUsed only
// says it was not seen in use since the start.
func expiredImages(candidates []candidate, now, began time.Time, maxAge time.Duration) (expired, rest []candidate) {
	if maxAge == 0 || now.Sub(began) <= maxAge {
		return nil, candidates
	}
	for _, c := range candidates {
		if now.Sub(c.lastUsed) > maxAge {
			expired = append(expired, c)
		} else {
			rest = append(rest, c)
		}
	}
	return expired, rest
}

// oldEnough is the candidates first detected at least minAge before now,
// in their order: those collection may remove for space.
func oldEnough(candidates []candidate, now time.Time, minAge time.Duration) []candidate {
	var out []candidate
	for _, c := range candidates {
		if now.Sub(c.firstDetected) >= minAge {
			out = append(out, c)
		}
	}
	return out
}
