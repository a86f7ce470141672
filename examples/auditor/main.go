package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "auditor:", err)
		os.Exit(1)
	}
}

// entry is a line of the ledger: the event as a CloudEvent, with its
// sequence in JETLET_EVENTS as an extension attribute.
type entry struct {
	schemas.CloudEvent
	Seq uint64 `json:"jetletseq"`
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("auditor", flag.ContinueOnError)
	url := fs.String("nats-url", client.DefaultURL, "the fleet's NATS")
	dataDir := fs.String("data-dir", "", "the data dir of a jetlet run whose NATS seed to present (default ./jetlet-data)")
	path := fs.String("ledger", "ledger.jsonl", "the JSON-lines ledger, appended to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ledger, last, err := openLedger(*path)
	if err != nil {
		return err
	}
	defer ledger.Close()
	c, err := client.Connect(ctx, client.Options{URL: *url, DataDir: *dataDir, Name: "auditor", LongLived: true})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(os.Stderr, "auditor: following every node's events after sequence %d into %s\n", last, *path)

	// The events are read on one goroutine and written on this one, which
	// writes what has come and then syncs it once: a group commit, so that
	// a backlog is not read at the pace of one fsync an event.
	lines := make(chan []byte, 1024)
	readErr := make(chan error, 1)
	go func() {
		readErr <- c.Events(ctx, client.EventsOptions{After: last, Follow: true}, func(e *client.Event) error {
			line, err := json.Marshal(entry{CloudEvent: e.CloudEvent(), Seq: e.Seq})
			if err != nil {
				return err
			}
			select {
			case lines <- append(line, '\n'):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for {
		select {
		case err := <-readErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case line := <-lines:
			if err := write(ledger, line, lines); err != nil {
				return err
			}
		}
	}
}

// write appends line, and the lines already waiting (up to the channel's
// capacity, so that a steady flow is still synced), each with one write (a
// process killed meanwhile leaves whole lines), then syncs the file.
func write(ledger *os.File, line []byte, more <-chan []byte) error {
	for n := 1; ; n++ {
		if _, err := ledger.Write(line); err != nil {
			return err
		}
		if n == cap(more) {
			return ledger.Sync()
		}
		select {
		case line = <-more:
		default:
			return ledger.Sync()
		}
	}
}

// openLedger opens the ledger for appending and returns the sequence of its
// last event: the ledger is the auditor's position, so that an event is in it
// exactly when it was handled, whenever the auditor was killed. A last line
// cut short by a crash is cut off; its event is read again.
func openLedger(path string) (*os.File, uint64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, err
	}
	var last uint64
	var good int64 // the length of the whole lines
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a line without its newline was being written
		}
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		var e entry
		if err := json.Unmarshal(bytes.TrimSpace(line), &e); err != nil || e.Seq <= last {
			f.Close()
			return nil, 0, fmt.Errorf("%s: line %d is not an event after sequence %d: not a ledger of this auditor", path, n, last)
		}
		last, good = e.Seq, good+int64(len(line))
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, 0, err
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, err
	}
	// A new ledger's name must outlive a crash too.
	dir, err := os.Open(filepath.Dir(path))
	if err == nil {
		err = dir.Sync()
		dir.Close()
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, last, nil
}
