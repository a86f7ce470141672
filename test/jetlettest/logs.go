package jetlettest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/jetlet/jetlet/runtime/containerlogs"
)

// RotatedLogSettled returns the files of the container log at path once
// it ends with last and its rotation has nothing left to do: the current
// file under maxSize, at most maxFiles files (no pruning due), no compression
// in progress, every rotated file but the newest compressed. Else it returns
// nil: poll it.
func RotatedLogSettled(path string, maxSize int64, maxFiles int, last string) []string {
	files, err := containerlogs.Files(path)
	entries, _ := filepath.Glob(path + ".*")
	info, serr := os.Stat(path)
	if err != nil || serr != nil || info.Size() >= maxSize || len(files) > maxFiles || len(entries) != len(files)-1 {
		return nil // a rotation or a pruning is due, or a compression runs (its .tmp, or both forms of one file)
	}
	for i, f := range files[:len(files)-1] {
		if (i < len(files)-2) != strings.HasSuffix(f, ".gz") {
			return nil
		}
	}
	newest := files[len(files)-1]
	if info.Size() == 0 && len(files) > 1 {
		newest = files[len(files)-2]
	}
	data, err := os.ReadFile(newest)
	if err != nil || !bytes.HasSuffix(data, []byte(last)) {
		return nil
	}
	return files
}
