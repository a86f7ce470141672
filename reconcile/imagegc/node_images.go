package imagegc

import (
	"cmp"
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// nodeStatusMaxImages is how many images the node's status lists,
	// kubelet's --node-status-max-images default.
	nodeStatusMaxImages = 50
	// maxNamesPerImageInNodeStatus is how many names of an image it lists,
	// kubelet's MaxNamesPerImageInNodeStatus.
	maxNamesPerImageInNodeStatus = 5
	// nodeImagesRefresh is how long a listing serves the node's status,
	// kubelet's image cache refresh period: the record is written on every
	// change of the node (up to once a second), which needs no CRI call each.
	nodeImagesRefresh = 30 * time.Second
)

// NodeImages is the node's images for its status, as kubelet's node status
// lists them: the 50 largest, largest first, each with up to 5 names (its
// repo digests, then its repo tags) and its size. A list serves for
// nodeImagesRefresh, as kubelet's image cache; while the runtime cannot list
// images it is the last list it could (nil before any), with a warning. The
// caller must not change it.
func (m *ImageGCManager) NodeImages(ctx context.Context) []corev1.ContainerImage {
	m.nodeImagesMu.Lock()
	defer m.nodeImagesMu.Unlock()
	now := m.clock.Now()
	if !m.nodeImagesListed.IsZero() && now.Sub(m.nodeImagesListed) < nodeImagesRefresh {
		return m.lastNodeImages
	}
	images, err := m.rt.ListImages(ctx, nil)
	if err != nil {
		m.log.Warn().Err(err).Msg("Failed to update image list: the node's images are those of the last list")
		return m.lastNodeImages
	}
	m.lastNodeImages, m.nodeImagesListed = nodeImages(images), now
	return m.lastNodeImages
}

// nodeImages is images as the node's status lists them; sizes break ties
// by the greater id, as kubelet's sliceutils.ByImageSize.
func nodeImages(images []*runtimeapi.Image) []corev1.ContainerImage {
	images = slices.Clone(images)
	slices.SortFunc(images, func(a, b *runtimeapi.Image) int {
		return cmp.Or(cmp.Compare(b.GetSize(), a.GetSize()), cmp.Compare(b.GetId(), a.GetId()))
	})
	images = images[:min(len(images), nodeStatusMaxImages)]
	out := make([]corev1.ContainerImage, 0, len(images))
	for _, im := range images {
		// Never nil: kubelet writes an image with no names as "names": [].
		names := append(append([]string{}, im.GetRepoDigests()...), im.GetRepoTags()...)
		out = append(out, corev1.ContainerImage{
			Names:     names[:min(len(names), maxNamesPerImageInNodeStatus)],
			SizeBytes: int64(im.GetSize()),
		})
	}
	return out
}
