package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageFsInfo reports the filesystem holding Dir for images and containers.
// Images take no space; containers' usage is not measured (0).
func (r *Runtime) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	usage := &runtimeapi.FilesystemUsage{
		Timestamp:  nowNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: r.cfg.Dir},
		UsedBytes:  &runtimeapi.UInt64Value{Value: 0},
		InodesUsed: &runtimeapi.UInt64Value{Value: 0},
	}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems:     []*runtimeapi.FilesystemUsage{usage},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{usage},
	}, nil
}
