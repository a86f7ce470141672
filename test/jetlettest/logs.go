package jetlettest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// RotationSettles returns a condition for poll.Until that holds once
// RotatedLogSettled has returned the same files looks times in a row, and
// sets files to them: one listing can fall between two steps of a rotation
// pass that the listing cannot see (CI saw a compressed file vanish after a
// single settled listing), so the files must stay as they are for longer
// than the rotator's monitor interval (looks × poll.Interval).
func RotationSettles(path string, maxSize int64, maxFiles int, last string, looks int, files *[]string) func() bool {
	same := 0
	return func() bool {
		now := RotatedLogSettled(path, maxSize, maxFiles, last)
		if now == nil || !slices.Equal(now, *files) {
			same = 0
		} else {
			same++
		}
		*files = now
		return same >= looks
	}
}

// CheckChattyLogRotation checks the settled files of a container that wrote
// 70 MiB of 1,023-byte lines under --container-log-max-size 10Mi and
// --container-log-max-files 5: only the newest rotated file and the current
// one are left uncompressed (about 20 MiB), and the lines kept are those of
// the 4 rotated files and the current one.
func CheckChattyLogRotation(t testing.TB, files []string) {
	t.Helper()
	var plain, compressed int64
	lines := 0
	for i, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".gz") {
			compressed += info.Size()
			if i >= len(files)-2 {
				t.Errorf("%s is compressed; the newest rotated file and the current one are not", f)
			}
		} else {
			plain += info.Size()
		}
		r, err := containerlogs.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		lines += bytes.Count(data, []byte("\n"))
	}
	t.Logf("%d files, %d lines: %.1f MiB uncompressed, %.1f MiB compressed", len(files), lines, float64(plain)/(1<<20), float64(compressed)/(1<<20))
	// A rotation happens within the monitor interval of passing 10 MiB.
	if plain > 24<<20 {
		t.Errorf("%d bytes uncompressed on disk, want about 20 MiB at most", plain)
	}
	// Each of the 4 rotated files passed 10 MiB before it was rotated, and a
	// line of a file is the 1,023 bytes written, a newline and the CRI
	// prefix (a timestamp of at most 30 bytes and " stdout F "): 1,064
	// bytes at most. So at least 40 MiB / 1,064 lines are kept (the current
	// file adds what came after), at most the 60 of 70 MiB written.
	const lineBytes = 1023 + 1 + 30 + len(" stdout F ")
	if min, max := 4*(10<<20)/lineBytes, 60*1024; lines < min || lines > max {
		t.Errorf("%d lines kept, want %d to %d: the 4 rotated files of 10 MiB and the current one, of the newest of 70 MiB", lines, min, max)
	}
}
