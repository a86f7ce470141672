package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// directBatch is how many messages one batched direct get asks for.
const directBatch = 256

// directGetTimeout bounds one batched direct get.
const directGetTimeout = 5 * time.Second

// ReadStored calls fn with each message stream holds on filter (wildcards
// allowed), oldest first, from the first one stored at or after since (the
// zero time: from the start). It reads with batched direct gets (ADR-31), a
// request per directBatch messages, so it creates no consumer: a read costs
// the cluster's meta layer nothing. It returns the sequence of the last
// message read, 0 when none matched. A read that does not end with the
// server's end-of-batch (or not found) fails: a silence is never taken for
// an empty stream.
//
// Any replica in sync may answer a direct get, so what is read is a prefix of
// the stream that may lag its leader by the messages stored meanwhile; a
// caller that must not miss one conditions its next write on the last
// sequence read (Nats-Expected-Last-Subject-Sequence), which the leader
// checks.
func ReadStored(ctx context.Context, js jetstream.JetStream, denials *Denials, stream, filter string, since time.Time, fn func(*jetstream.RawStreamMsg) error) (last uint64, err error) {
	req := directGetRequest{NextFor: filter, Batch: directBatch}
	if since.IsZero() {
		req.Seq = 1
	} else {
		req.StartTime = &since
	}
	subject := "$JS.API.DIRECT.GET." + stream
	for {
		var more bool
		err := UnlessDenied(ctx, denials, subject, func(ctx context.Context) (err error) {
			more, err = directGetBatch(ctx, js.Conn(), subject, req, func(m *jetstream.RawStreamMsg) error {
				last = m.Sequence
				return fn(m)
			})
			return err
		})
		if err != nil {
			return last, fmt.Errorf("read %s on %s: %w", filter, stream, err)
		}
		if !more {
			return last, nil
		}
		req.Seq, req.StartTime = last+1, nil
	}
}

// directGetRequest is the body of a batched direct get (ADR-31).
type directGetRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	Batch     int        `json:"batch,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// directGetBatch makes one batched direct get and calls fn with each message
// of its answer; more reports that the server stopped short of the end (the
// batch or its byte limit was reached).
func directGetBatch(ctx context.Context, nc *nats.Conn, subject string, req directGetRequest, fn func(*jetstream.RawStreamMsg) error) (more bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, directGetTimeout)
	defer cancel()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return false, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return false, err
	}
	for first := true; ; first = false {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return false, fmt.Errorf("batched direct get: %w", err)
		}
		switch status := m.Header.Get("Status"); {
		case status == "404" && first:
			return false, nil // nothing matches
		case status == "204": // end of batch
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return pending > 0, nil
		case status == "503":
			return false, nats.ErrNoResponders
		case status != "":
			return false, fmt.Errorf("batched direct get: status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return false, fmt.Errorf("batched direct get: a message without its sequence: %w", err)
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
		if err := fn(&jetstream.RawStreamMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data, Time: ts}); err != nil {
			return false, err
		}
	}
}

// WrongLastSequence reports whether err is JetStream refusing a publish
// whose Nats-Expected-Last-Subject-Sequence was not the subject's last
// (replicated streams answer a code of their own while another write to the
// subject is in flight).
func WrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
