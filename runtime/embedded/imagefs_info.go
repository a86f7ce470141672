package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageFsInfo reports the file system holding the image store, with what the
// store uses of it (bytes and inodes), for images and containers alike: the
// containers' upper dirs live on the same file system. A runtime without an
// image store uses nothing there.
func (r *Runtime) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	var used, inodes uint64
	mountpoint := r.cfg.Dir
	if r.store != nil {
		used, inodes, mountpoint = r.store.Usage()
	}
	usage := &runtimeapi.FilesystemUsage{
		Timestamp:  nowNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: mountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
	}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems:     []*runtimeapi.FilesystemUsage{usage},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{usage},
	}, nil
}
