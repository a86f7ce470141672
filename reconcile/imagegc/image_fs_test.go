package imagegc

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestSpaceToFree(t *testing.T) {
	tests := []struct {
		name                string
		capacity, available int64
		high, low           int
		wantUsage           int
		wantToFree          int64
		wantErr             string
	}{
		{name: "below the high threshold frees nothing", capacity: 1000, available: 160, high: 85, low: 80, wantUsage: 84},
		{name: "at the high threshold frees down to the low one", capacity: 1000, available: 150, high: 85, low: 80, wantUsage: 85, wantToFree: 50},
		{name: "usage rounds up: 84.9% counts as 85%", capacity: 1000, available: 151, high: 85, low: 80, wantUsage: 85, wantToFree: 49},
		{name: "a full disk frees the low threshold's share", capacity: 1000, available: 0, high: 85, low: 80, wantUsage: 100, wantToFree: 200},
		{name: "more available than capacity is an empty disk", capacity: 1000, available: 5000, high: 85, low: 80, wantUsage: 0},
		{name: "high 0 always frees", capacity: 1000, available: 990, high: 1, low: 0, wantUsage: 1, wantToFree: 10},
		{name: "high 100 frees only a full disk", capacity: 1000, available: 1, high: 100, low: 80, wantUsage: 100, wantToFree: 199},
		{name: "a disk of no capacity is an error", capacity: 0, available: 0, high: 85, low: 80, wantErr: "invalid capacity 0 on image filesystem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{HighThresholdPercent: tt.high, LowThresholdPercent: tt.low}
			usage, toFree, err := spaceToFree(filesystemStats{capacity: tt.capacity, available: tt.available}, p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || usage != tt.wantUsage || toFree != tt.wantToFree {
				t.Fatalf("spaceToFree = %d%%, %d bytes, %v; want %d%%, %d bytes", usage, toFree, err, tt.wantUsage, tt.wantToFree)
			}
		})
	}
}

// The image file system is the one the runtime names, measured there.
func TestImageFsIsTheRuntimesMountpointMeasured(t *testing.T) {
	rt := newFakeRuntime()
	rt.mountpoint = t.TempDir()
	m, err := New(rt, Config{Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := m.imageFs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, err := statfs(rt.mountpoint)
	if err != nil {
		t.Fatal(err)
	}
	if fs.capacity != want.capacity || fs.capacity <= 0 || fs.available < 0 || fs.available > fs.capacity {
		t.Fatalf("imageFs = %+v, want the capacity of %s (%d) and no more available", fs, rt.mountpoint, want.capacity)
	}

	rt.mountpoint = ""
	if _, err := m.imageFs(context.Background()); err == nil || !strings.Contains(err.Error(), "no mountpoint") {
		t.Fatalf("imageFs with no mountpoint: %v", err)
	}
	rt.mountpoint = "/nonexistent/jetlet-imagegc"
	if _, err := m.imageFs(context.Background()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("imageFs of a missing mountpoint: %v, want ENOENT", err)
	}
}
