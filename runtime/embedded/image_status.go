package embedded

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageStatus returns the image, or a nil image (and no error) when it is not
// known, as the CRI requires.
func (r *Runtime) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	if r.store != nil {
		return r.storeImageStatus(req), nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	im := r.lookupImage(req.GetImage().GetImage())
	if im == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: im.cri()}
	if req.GetVerbose() {
		info, _ := json.Marshal(map[string]any{
			"note":     "jetlet-proc does not download images; this records the reference only",
			"pulledAt": im.PulledAt,
		})
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}
