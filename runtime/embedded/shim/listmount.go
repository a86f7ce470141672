package shim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mountPointsUnder returns the mount points at dir and below it, each once,
// parents before children, as readMountPoints lists them. Where the kernel
// has listmount(2) and statmount(2) (Linux 6.8), it asks for dir's mounts
// alone: /proc/self/mountinfo formats every mount of the namespace, and a
// node's mounts grow with its pods (each sandbox's network namespace and
// /dev/shm), so that every container's init once read them all (a third of
// its time among a thousand pods). Elsewhere it reads mountinfo.
func mountPointsUnder(dir string) ([]string, error) {
	points, err := listMountPointsUnder(dir)
	if errors.Is(err, errNoListmount) {
		return readMountPointsUnder(dir)
	}
	return points, err
}

// readMountPointsUnder is mountPointsUnder through mountinfo.
func readMountPointsUnder(dir string) ([]string, error) {
	all, err := readMountPoints()
	if err != nil {
		return nil, err
	}
	var points []string
	for _, mp := range all {
		if under(mp, dir) {
			points = append(points, mp)
		}
	}
	return points, nil
}

// errNoListmount is listMountPointsUnder's answer where it cannot answer:
// a kernel before listmount(2), or dir not a mount of its own.
var errNoListmount = errors.New("no listmount")

// listMountPointsUnder is mountPointsUnder through listmount(2) and
// statmount(2). listmount lists every mount below the one it is asked of,
// not only its children, in the order of their unique ids, the order
// mountinfo lists them in: one call, not one a mount (each call walks the
// whole namespace's mounts).
func listMountPointsUnder(dir string) ([]string, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID_UNIQUE, &st); err != nil {
		return nil, fmt.Errorf("statx %s: %w", dir, err)
	}
	// Before Linux 6.8 the kernel leaves the unique id out of the mask.
	if st.Mask&unix.STATX_MNT_ID_UNIQUE == 0 || st.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return nil, errNoListmount
	}
	below, err := listmount(st.Mnt_id)
	// Without the calls, or refused them by a seccomp filter (a container
	// runtime's default one answers EPERM to calls it does not know).
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return nil, errNoListmount
	}
	if err != nil {
		return nil, err
	}
	points := []string{dir}
	seen := map[string]bool{dir: true}
	for _, id := range below {
		mp, err := statmountPoint(id)
		if errors.Is(err, unix.ENOENT) {
			continue // unmounted since the list
		}
		if err != nil {
			return nil, err
		}
		if !seen[mp] { // a mount stacked on another's mount point
			seen[mp] = true
			points = append(points, mp)
		}
	}
	return points, nil
}

// mntIDReq is the kernel's struct mnt_id_req, its first version.
type mntIDReq struct {
	size  uint32
	_     uint32
	mntID uint64
	param uint64
}

// listmount returns the unique ids of the mounts below mount id, at any
// depth.
func listmount(id uint64) ([]uint64, error) {
	req := mntIDReq{size: uint32(unsafe.Sizeof(mntIDReq{})), mntID: id}
	var ids []uint64
	buf := make([]uint64, 64)
	for {
		n, _, errno := unix.Syscall6(unix.SYS_LISTMOUNT, uintptr(unsafe.Pointer(&req)),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		if errno != 0 {
			return nil, fmt.Errorf("listmount %d: %w", id, errno)
		}
		ids = append(ids, buf[:n]...)
		if int(n) < len(buf) {
			return ids, nil
		}
		req.param = buf[n-1] // the next call lists the ids after it
	}
}

// struct statmount: its fields and the offset of its strings.
const (
	statmountMntBasic     = 0x02 // STATMOUNT_MNT_BASIC: mnt_id among others
	statmountMntPoint     = 0x10 // STATMOUNT_MNT_POINT
	statmountMaskOffset   = 8    // __u64 mask
	statmountMntIDOffset  = 40   // __u64 mnt_id
	statmountPointOffset  = 108  // __u32 mnt_point, in str
	statmountStringOffset = 512  // char str[]
)

// statmountPoint returns the mount point of mount id, as this process's root
// sees it.
func statmountPoint(id uint64) (string, error) {
	req := mntIDReq{size: uint32(unsafe.Sizeof(mntIDReq{})), mntID: id, param: statmountMntBasic | statmountMntPoint}
	buf := make([]byte, 4096)
	for {
		_, _, errno := unix.Syscall6(unix.SYS_STATMOUNT, uintptr(unsafe.Pointer(&req)),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		if errno == unix.EOVERFLOW {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if errno != 0 {
			return "", fmt.Errorf("statmount %d: %w", id, errno)
		}
		break
	}
	if got := binary.NativeEndian.Uint64(buf[statmountMntIDOffset:]); got != id {
		return "", fmt.Errorf("statmount %d: answered for mount %d", id, got)
	}
	if binary.NativeEndian.Uint64(buf[statmountMaskOffset:])&statmountMntPoint == 0 {
		return "", fmt.Errorf("statmount %d: no mount point", id)
	}
	str := buf[statmountStringOffset+int(binary.NativeEndian.Uint32(buf[statmountPointOffset:])):]
	end := bytes.IndexByte(str, 0)
	if end < 0 {
		return "", fmt.Errorf("statmount %d: mount point not terminated", id)
	}
	return string(str[:end]), nil
}
