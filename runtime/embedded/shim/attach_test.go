package shim

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// attachedPipes attaches the write ends of two pipes to f and returns their
// read ends (stdout, stderr).
func attachedPipes(t *testing.T, f *fanout) (*attachment, *os.File, *os.File) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outR.Close(); errR.Close() })
	a := newAttachment(outW, errW)
	if !f.attach(a) {
		t.Fatal("attach refused")
	}
	return a, outR, errR
}

func TestFanoutSendsEachStreamToItsFileUntilTheEnd(t *testing.T) {
	var f fanout
	_, outR, errR := attachedPipes(t, &f)
	f.send(false, []byte("out "))
	f.send(true, []byte("err"))
	f.send(false, []byte("put"))
	f.end()
	// After the end, the files are closed: reads end.
	out, _ := io.ReadAll(outR)
	errOut, _ := io.ReadAll(errR)
	if string(out) != "out put" || string(errOut) != "err" {
		t.Fatalf("stdout %q, stderr %q", out, errOut)
	}
	if f.attach(newAttachment(nil, nil)) {
		t.Fatal("attached after the end")
	}
}

// attached tells whether a is attached to f.
func attached(f *fanout, a *attachment) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.subs[a]
	return ok
}

func TestFanoutDetachesAClientThatFallsBehind(t *testing.T) {
	var f fanout
	slow, slowR, _ := attachedPipes(t, &f)
	fast, fastR, _ := attachedPipes(t, &f)
	piece := bytes.Repeat([]byte("x"), 64<<10)
	received := make(chan error)
	go func() {
		buf := make([]byte, len(piece))
		for {
			_, err := io.ReadFull(fastR, buf)
			received <- err
			if err != nil {
				return
			}
		}
	}()

	// Nobody reads the slow client's pipe: its writer blocks once the pipe
	// is full, its queue fills, and the next piece detaches it. Sending
	// never blocks. The fast client reads each piece before the next is
	// sent.
	sent := 0
	for attached(&f, slow) {
		f.send(false, piece)
		sent++
		if err := <-received; err != nil {
			t.Fatal(err)
		}
		if sent > attachBacklog+16 {
			t.Fatalf("still attached after %d pieces", sent)
		}
	}
	// Detached, it gets what was queued, then the end.
	got, _ := io.ReadAll(slowR)
	if len(got) == 0 || len(got) >= sent*len(piece) {
		t.Fatalf("the slow client got %d of %d bytes", len(got), sent*len(piece))
	}
	if !attached(&f, fast) {
		t.Fatal("the client that keeps up was detached")
	}
	f.end()
	if err := <-received; err != io.EOF {
		t.Fatalf("the fast client's end: %v", err)
	}
}
