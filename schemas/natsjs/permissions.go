package natsjs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// PermissionError is NATS refusing this connection's user a publish (a
// JetStream API request is one) or a subscription.
type PermissionError struct {
	Op      string // "publish" or "subscribe"
	Subject string
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("permission denied: NATS refused to let this user %s to %q", e.Op, e.Subject)
}

// PermissionKinds are the values of What.
var PermissionKinds = []string{"result", "event", "dead", "intent", "status", "heartbeat", "consumer", "stream", "other"}

// What names the kind of message a denied subject carries, for the
// jetlet_permission_denied_total metric and the log: one of PermissionKinds.
func (e *PermissionError) What(prefix string) string {
	s := e.Subject
	for _, k := range []string{"result", "event", "dead", "intent"} {
		if strings.HasPrefix(s, prefix+"."+k+".") || s == prefix+"."+k {
			return k
		}
	}
	switch {
	case strings.HasPrefix(s, "$KV.jetlet_status."):
		return "status"
	case strings.HasPrefix(s, "$KV.jetlet_nodes."):
		return "heartbeat"
	case strings.HasPrefix(s, "$JS.API.CONSUMER."), strings.HasPrefix(s, "$JS.ACK."):
		return "consumer"
	case strings.HasPrefix(s, "$JS.API.STREAM."), strings.HasPrefix(s, "$JS.API.DIRECT."):
		return "stream"
	}
	return "other"
}

var violation = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "([^"]*)"`)

// AsPermissionError reads the subject out of the permissions violation that
// nats.go hands its asynchronous error handler; ok is false for any other
// error.
func AsPermissionError(err error) (*PermissionError, bool) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil, false
	}
	m := violation.FindStringSubmatch(err.Error())
	if m == nil {
		return &PermissionError{Op: "publish"}, true
	}
	op := "publish"
	if strings.EqualFold(m[1], "subscription") {
		op = "subscribe"
	}
	return &PermissionError{Op: op, Subject: m[2]}, true
}

// Denials ends the waits that a refused publish makes hopeless. NATS does
// not answer a request whose publish it refused; it tells the connection
// asynchronously. Without Denials a JetStream API call on a denied subject
// waits for its timeout and fails as if NATS were slow.
type Denials struct {
	mu      sync.Mutex
	waiters map[*denialWaiter]struct{} // guarded by mu
}

type denialWaiter struct {
	prefix string
	cancel context.CancelCauseFunc
}

// Watch returns ctx, cancelled with the *PermissionError as its cause
// (context.Cause) when NATS refuses a publish to prefix or to a subject
// whose first tokens are prefix's. The returned stop releases it. A nil
// Denials watches nothing.
func (d *Denials) Watch(ctx context.Context, prefix string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if d == nil {
		return ctx, func() { cancel(nil) }
	}
	w := &denialWaiter{prefix: prefix, cancel: cancel}
	d.mu.Lock()
	if d.waiters == nil {
		d.waiters = map[*denialWaiter]struct{}{}
	}
	d.waiters[w] = struct{}{}
	d.mu.Unlock()
	return ctx, func() {
		d.mu.Lock()
		delete(d.waiters, w)
		d.mu.Unlock()
		cancel(nil)
	}
}

// Observe cancels the watches of the denied subject and reports whether
// there were any: the watchers then handle the denial.
func (d *Denials) Observe(pe *PermissionError) (watched bool) {
	if d == nil || pe.Op != "publish" {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.waiters {
		if pe.Subject == w.prefix || strings.HasPrefix(pe.Subject, w.prefix+".") {
			w.cancel(pe)
			watched = true
		}
	}
	return watched
}

// Denied returns the *PermissionError that ended a watched ctx, if that is
// what ended it.
func Denied(ctx context.Context) (*PermissionError, bool) {
	var pe *PermissionError
	ok := errors.As(context.Cause(ctx), &pe)
	return pe, ok
}
