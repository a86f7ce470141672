package imagegc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/test/syncbuf"
)

// logLine is what a test reads of a log line.
type logLine struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Error   string `json:"error"`
}

func logLines(t *testing.T, buf *syncbuf.Buffer) []logLine {
	t.Helper()
	var out []logLine
	for l := range strings.Lines(buf.String()) {
		var line logLine
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, line)
	}
	return out
}

// Run collects at once and every ImageGCPeriod, and logs failures as
// kubelet: the first as one that may pass, those in a row after it with
// the reason ImageGCFailed, and the success that ends them.
func TestRunCollectsEveryPeriodAndLogsFailuresAsKubelet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.addImage("sha256:a", 10, false)
		var buf syncbuf.Buffer
		m, err := New(rt, Config{Policy: DefaultPolicy(), Logger: zerolog.New(&buf).Level(zerolog.InfoLevel)})
		if err != nil {
			t.Fatal(err)
		}
		m.statfs = func(string) (filesystemStats, error) { return filesystemStats{capacity: 100, available: 50}, nil }
		rt.setListErr(errInjected)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			m.Run(ctx)
			close(done)
		}()

		synctest.Wait()
		want := []logLine{{Level: "error", Message: "Image garbage collection failed once. Stats initialization may not have completed yet", Error: "list images: injected failure"}}
		if got := logLines(t, &buf); len(got) != 1 || got[0] != want[0] {
			t.Fatalf("at the start: %+v, want %+v", got, want)
		}

		time.Sleep(ImageGCPeriod - time.Nanosecond)
		synctest.Wait()
		if got := logLines(t, &buf); len(got) != 1 {
			t.Fatalf("before a period passed: %+v, want no other pass", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		want = append(want, logLine{Level: "error", Message: "Image garbage collection failed multiple times in a row", Reason: "ImageGCFailed", Error: "list images: injected failure"})
		if got := logLines(t, &buf); len(got) != 2 || got[1] != want[1] {
			t.Fatalf("after a period: %+v, want %+v", got, want)
		}

		rt.setListErr(nil)
		time.Sleep(ImageGCPeriod)
		synctest.Wait()
		want = append(want, logLine{Level: "info", Message: "Image garbage collection succeeded"})
		if got := logLines(t, &buf); len(got) != 3 || got[2] != want[2] {
			t.Fatalf("once the runtime answers: %+v, want %+v", got, want)
		}
		cancel()
		<-done
	})
}

// With the high threshold at 100 and no maximum age, Run removes nothing,
// even from a full disk, but tracks the images so that DeleteUnusedImages
// knows their ages.
func TestRunOnlyTracksImagesWhenCollectionIsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.addImage("sha256:a", 10, false)
		p := DefaultPolicy()
		p.HighThresholdPercent = 100
		m, err := New(rt, Config{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		m.statfs = func(string) (filesystemStats, error) { return filesystemStats{capacity: 100}, nil }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			m.Run(ctx)
			close(done)
		}()
		time.Sleep(ImageGCPeriod)
		synctest.Wait()
		if ids := rt.ids(); len(ids) != 1 {
			t.Fatalf("images left %v, want sha256:a: collection is off", ids)
		}
		freed, err := m.DeleteUnusedImages(ctx)
		if err != nil || freed != 10 || len(rt.ids()) != 0 {
			t.Fatalf("DeleteUnusedImages after %s = %d, %v (left %v): want sha256:a, tracked since the start, removed", ImageGCPeriod, freed, err, rt.ids())
		}
		cancel()
		<-done
	})
}
