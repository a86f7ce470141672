package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/diskusage"
)

// ImageFsInfo reports the file system holding the image store, with what the
// store uses of it (bytes and inodes). On one file system with the
// containers' writable layers it is reported for both; on a file system of
// its own (ImageDir, KEP-4191's split image file system) the containers'
// file system is reported apart, with what their dirs use of it (walked
// beneath each, as du). A runtime without an image store uses nothing there.
func (r *Runtime) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	var used, inodes uint64
	mountpoint := r.cfg.ImageDir
	if r.store != nil {
		used, inodes, mountpoint = r.store.Usage()
	}
	images := fsUsage(mountpoint, used, inodes)
	containers := images
	if r.splitImageFs {
		u, err := diskusage.Measure(r.containersDir())
		if err != nil {
			return nil, err
		}
		containers = fsUsage(r.containersDir(), uint64(u.Bytes), uint64(u.Inodes))
	}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems:     []*runtimeapi.FilesystemUsage{images},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{containers},
	}, nil
}

func fsUsage(mountpoint string, used, inodes uint64) *runtimeapi.FilesystemUsage {
	return &runtimeapi.FilesystemUsage{
		Timestamp:  nowNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: mountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
	}
}
