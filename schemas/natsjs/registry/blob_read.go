package registry

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas/natsjs"
)

// errTruncated: the stream answered fewer chunks than the object has (a
// replica behind the one that answered its info, or an object replaced
// while it was read).
var errTruncated = errors.New("object truncated")

// directGetRequest is JetStream's direct get request: the messages on
// next_by_subj from seq, batch of them at most, stopping once max_bytes are
// sent.
type directGetRequest struct {
	Seq      uint64 `json:"seq,omitempty"`
	NextFor  string `json:"next_by_subj"`
	Batch    int    `json:"batch"`
	MaxBytes int    `json:"max_bytes"`
}

// chunkReader copies an object's content out of its bucket's stream with
// batched direct gets: a request asks for window bytes of chunks, and the
// next is sent once they are written. At most a window (and one chunk) of
// an object is held in memory however large it is, and no consumer is made:
// any replica of the stream may answer.
type chunkReader struct {
	nc      *nats.Conn
	bucket  string
	window  int
	timeout time.Duration // of each wait for a message
}

// copyObject writes the content of the object info describes to w and
// checks that it was all there and had the object's digest. An error after
// some bytes were written leaves w with a part of it.
func (c chunkReader) copyObject(ctx context.Context, info *jetstream.ObjectInfo, w io.Writer) error {
	if info.Size == 0 {
		return nil
	}
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe() //nolint:errcheck // best effort: the connection may be gone
	subject := "$JS.API.DIRECT.GET." + natsjs.ObjectStoreStream(c.bucket)
	chunks := fmt.Sprintf("$O.%s.C.%s", c.bucket, info.NUID)
	h := sha256.New()
	var seq uint64
	var copied uint64
	for left := info.Chunks; left > 0; {
		req, _ := json.Marshal(directGetRequest{Seq: seq, NextFor: chunks, Batch: int(left), MaxBytes: c.window})
		if err := c.nc.PublishRequest(subject, inbox, req); err != nil {
			return err
		}
		got, last, err := c.readBatch(ctx, sub, chunks, func(data []byte) error {
			h.Write(data)
			copied += uint64(len(data))
			_, err := w.Write(data)
			return err
		})
		if err != nil {
			return err
		}
		if got == 0 {
			return fmt.Errorf("%w: %d of %d chunks read", errTruncated, info.Chunks-left, info.Chunks)
		}
		left -= min(got, left)
		seq = last + 1
	}
	sum := jetstream.GetObjectDigestValue(h)
	if copied != info.Size || sum != info.Digest {
		return fmt.Errorf("object %s: read %d bytes of digest %s, its info says %d bytes of %s", info.Name, copied, sum, info.Size, info.Digest)
	}
	return nil
}

// readBatch hands write each chunk one request answers, until its end of
// batch. It returns how many chunks it wrote and the stream sequence of the
// last. A server that does not batch answers one message without
// Nats-Num-Pending: that is its whole answer.
func (c chunkReader) readBatch(ctx context.Context, sub *nats.Subscription, chunks string, write func([]byte) error) (got uint32, last uint64, err error) {
	for {
		msg, err := c.next(ctx, sub)
		if err != nil {
			return got, last, err
		}
		switch status := msg.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			return got, last, nil
		case "404": // no message on the subject from seq on
			return got, last, nil
		case "503":
			return got, last, fmt.Errorf("stream %s: no responders (is the object store there?)", natsjs.ObjectStoreStream(c.bucket))
		default:
			return got, last, fmt.Errorf("direct get from %s: status %s %s", natsjs.ObjectStoreStream(c.bucket), status, msg.Header.Get("Description"))
		}
		if subj := msg.Header.Get(jetstream.SubjectHeader); subj != chunks {
			return got, last, fmt.Errorf("direct get answered a message of %q, not of %q", subj, chunks)
		}
		if last, err = strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64); err != nil {
			return got, last, fmt.Errorf("direct get answered sequence %q", msg.Header.Get(jetstream.SequenceHeader))
		}
		if err := write(msg.Data); err != nil {
			return got, last, err
		}
		got++
		if msg.Header.Get("Nats-Num-Pending") == "" {
			return got, last, nil
		}
	}
}

func (c chunkReader) next(ctx context.Context, sub *nats.Subscription) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return sub.NextMsgWithContext(ctx)
}
