package natsjs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// natsViolation is a permissions violation as nats.go hands it to the
// asynchronous error handler.
func natsViolation(text string) error { return fmt.Errorf("%w: %s", nats.ErrPermissionViolation, text) }

func TestAsPermissionError(t *testing.T) {
	tests := []struct {
		err           error
		op, subject   string
		what          string
		notPermission bool
	}{
		{err: natsViolation(`Permissions Violation for Publish to "jetlet.result.n2.u1"`), op: "publish", subject: "jetlet.result.n2.u1", what: "result"},
		{err: natsViolation(`Permissions Violation for Publish to "$KV.jetlet_status.n2.u1"`), op: "publish", subject: "$KV.jetlet_status.n2.u1", what: "status"},
		{err: natsViolation(`Permissions Violation for Publish to "$KV.jetlet_nodes.n2"`), op: "publish", subject: "$KV.jetlet_nodes.n2", what: "heartbeat"},
		{err: natsViolation(`Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n2"`), op: "publish", subject: "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n2", what: "consumer"},
		{err: natsViolation(`Permissions Violation for Publish to "$JS.API.STREAM.UPDATE.JETLET_INTENTS"`), op: "publish", subject: "$JS.API.STREAM.UPDATE.JETLET_INTENTS", what: "stream"},
		{err: natsViolation(`Permissions Violation for Subscription to "jetlet.intent.n2.>"`), op: "subscribe", subject: "jetlet.intent.n2.>", what: "intent"},
		{err: natsViolation(`Permissions Violation for Publish to "jetlet.dead.n2"`), op: "publish", subject: "jetlet.dead.n2", what: "dead"},
		{err: natsViolation(`Permissions Violation for Publish to "other"`), op: "publish", subject: "other", what: "other"},
		{err: errors.New(`Permissions Violation for Publish to "x"`), notPermission: true},
	}
	for _, tt := range tests {
		pe, ok := AsPermissionError(tt.err)
		if ok == tt.notPermission {
			t.Errorf("AsPermissionError(%v): ok %v", tt.err, ok)
			continue
		}
		if !ok {
			continue
		}
		if pe.Op != tt.op || pe.Subject != tt.subject || pe.What("jetlet") != tt.what {
			t.Errorf("AsPermissionError(%v) = %+v (%s), want %s %s (%s)", tt.err, pe, pe.What("jetlet"), tt.op, tt.subject, tt.what)
		}
	}
}

func TestDenialsEndTheWatchedCallOnly(t *testing.T) {
	var d Denials
	watched, stop := d.Watch(context.Background(), "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1")
	defer stop()
	other, stopOther := d.Watch(context.Background(), "$JS.API.STREAM")
	defer stopOther()

	// Another node's name is not a token prefix of it, nor a subscription.
	for _, pe := range []*PermissionError{
		{Op: "publish", Subject: "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n10"},
		{Op: "subscribe", Subject: "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1"},
	} {
		if d.Observe(pe) {
			t.Errorf("%+v ended a watch", pe)
		}
	}
	if watched.Err() != nil {
		t.Fatal("the watch ended on another subject")
	}
	denied := &PermissionError{Op: "publish", Subject: "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1.jetlet.intent.n1.>"}
	if !d.Observe(denied) {
		t.Error("the denial found no watch")
	}
	if got, ok := Denied(watched); !ok || got != denied {
		t.Errorf("Denied = %v, %v; want the denial", got, ok)
	}
	if _, ok := Denied(other); ok || other.Err() != nil {
		t.Error("a watch of another prefix ended")
	}
	stopOther()
	if _, ok := Denied(other); ok {
		t.Error("a stopped watch reports a denial")
	}
	var none *Denials
	ctx, stopNone := none.Watch(context.Background(), "x")
	defer stopNone()
	if none.Observe(denied) || ctx.Err() != nil {
		t.Error("a nil Denials watches something")
	}
}
