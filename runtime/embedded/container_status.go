package embedded

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStatus reports state, pid (in the verbose info), times, exit code
// and reason, and the config's labels, annotations, image, mounts and log path
// as given.
func (r *Runtime) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	cs := c.statusLocked()
	st := c.shim
	r.mu.RUnlock()
	resp := &runtimeapi.ContainerStatusResponse{Status: cs}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": r.containerInfo(c, st)}
	}
	return resp, nil
}

// statusLocked is c's CRI status, as ContainerStatus reports it; r.mu must be
// held.
func (c *container) statusLocked() *runtimeapi.ContainerStatus {
	st, ex, res := c.shim, c.exit, c.resources
	cs := &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.config.GetMetadata(),
		State:       c.stateLocked(),
		CreatedAt:   c.createdAt,
		Image:       c.config.GetImage(),
		ImageRef:    c.imageID,
		ImageId:     c.imageID,
		Labels:      c.config.GetLabels(),
		Annotations: c.config.GetAnnotations(),
		Mounts:      c.mounts(),
		LogPath:     c.logPath,
		StopSignal:  c.config.GetStopSignal(),
	}
	if res != nil {
		cs.Resources = &runtimeapi.ContainerResources{Linux: res}
	}
	if st != nil {
		cs.StartedAt = st.StartedAt
		linux := &runtimeapi.LinuxContainerUser{Uid: int64(st.UID), Gid: int64(st.GID)}
		for _, g := range st.Groups {
			linux.SupplementalGroups = append(linux.SupplementalGroups, int64(g))
		}
		cs.User = &runtimeapi.ContainerUser{Linux: linux}
	}
	if ex != nil {
		cs.FinishedAt = ex.FinishedAt
		cs.ExitCode = ex.ExitCode
		cs.Reason = exitReason(ex)
		cs.Message = ex.Message
	}
	return cs
}

// containerInfo is the verbose info crictl inspect prints: where things are and
// what the shim runs.
func (r *Runtime) containerInfo(c *container, st *shim.State) string {
	info := map[string]any{
		"sandboxID": c.sandboxID,
		"dir":       c.dir,
		"rootfs":    filepath.Join(c.dir, "rootfs"),
		"config":    c.config,
	}
	if st != nil {
		info["pid"] = st.PID
		info["shimPid"] = st.ShimPID
	}
	var spec shim.ContainerSpec
	if data, err := os.ReadFile(filepath.Join(c.dir, "spec.json")); err == nil && json.Unmarshal(data, &spec) == nil {
		info["process"] = spec
	}
	out, _ := json.Marshal(info)
	return string(out)
}

// mounts are the config's mounts, an image volume's with the id of the image
// it mounts (image_ref), as containerd reports them.
func (c *container) mounts() []*runtimeapi.Mount {
	mounts := c.config.GetMounts()
	if c.images == nil || len(c.images.Volumes) == 0 {
		return mounts
	}
	out := make([]*runtimeapi.Mount, len(mounts))
	for i, m := range mounts {
		im := c.images.Volumes[filepath.Clean(m.GetContainerPath())]
		if m.GetImage().GetImage() == "" || im == nil {
			out[i] = m
			continue
		}
		m = proto.Clone(m).(*runtimeapi.Mount)
		m.Image.ImageRef = im.ID
		out[i] = m
	}
	return out
}
