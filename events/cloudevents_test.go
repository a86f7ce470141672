package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"

	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/natstest"
)

// Every event type, as stored in JETLET_EVENTS, is a CloudEvent in binary
// content mode that the CloudEvents Go SDK reads. The SDK's NATS bindings
// (github.com/cloudevents/sdk-go/protocol/nats_jetstream/v3 and nats/v2) are
// not served by the module proxy here, so natsBinaryMessage below reads the
// message by the NATS binding's rules (section 3.1) with the SDK's own
// attribute table for the ce- prefix (spec.WithPrefix, as those bindings
// do), and the SDK builds and validates the event (binding.ToEvent).
func TestEveryEventIsABinaryModeCloudEvent(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	p := startPublisher(t, js, events.Config{})
	at := time.Date(2026, 12, 2, 0, 45, 1, 123456789, time.UTC)
	for i, typ := range schemas.EventTypes {
		p.Emit(t.Context(), schemas.LifecycleEvent{
			ID: fmt.Sprintf("e%d", i), Type: typ, UID: "u1", Namespace: "default", Pod: "web",
			Container: "app", Message: `a "quoted" 100% message`, Time: at,
		})
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	for i, typ := range schemas.EventTypes {
		m, err := stream.GetMsg(t.Context(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		// The NATS binding, section 3.1.3.1.
		want := map[string]string{
			"ce-specversion": "1.0", "ce-id": fmt.Sprintf("e%d", i), "ce-source": "jetlet/n1",
			"ce-type": "dev.jetlet." + string(typ), "ce-time": "2026-12-02T00:45:01.123456789Z",
			"ce-subject": "default/web", "ce-datacontenttype": "application/json",
			"Nats-Msg-Id": fmt.Sprintf("e%d", i),
		}
		for h, v := range want {
			if got := m.Header.Get(h); got != v {
				t.Errorf("%s: header %s = %q, want %q", typ, h, got, v)
			}
		}

		msg := natsBinaryMessage{header: m.Header, body: m.Data}
		ce, err := binding.ToEvent(t.Context(), msg)
		if err != nil {
			t.Fatalf("%s: the SDK does not read a CloudEvent: %v", typ, err)
		}
		if err := ce.Validate(); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if ce.SpecVersion() != "1.0" || ce.ID() != fmt.Sprintf("e%d", i) || ce.Source() != "jetlet/n1" ||
			ce.Type() != "dev.jetlet."+string(typ) || !ce.Time().Equal(at) || ce.Subject() != "default/web" ||
			ce.DataContentType() != "application/json" {
			t.Errorf("%s: the SDK reads %s", typ, ce)
		}
		var ev schemas.LifecycleEvent
		if err := ce.DataAs(&ev); err != nil || ev.Type != typ || ev.Message != `a "quoted" 100% message` {
			t.Errorf("%s: data %+v (%v)", typ, ev, err)
		}
	}
}

// The attributes' values are percent-encoded where the binding says: a pod
// or node name never needs it, but the rule holds for any value.
func TestCloudEventHeadersArePercentEncoded(t *testing.T) {
	ce := schemas.CloudEventOf(&schemas.LifecycleEvent{ID: `a b"c%d€`, Node: "n1", Type: schemas.EventBackOff})
	h := map[string][]string{}
	ce.SetHeaders(h)
	if got, want := h["ce-id"][0], "a%20b%22c%25d%E2%82%AC"; got != want {
		t.Errorf("ce-id = %q, want %q", got, want)
	}
	if got := h["ce-source"][0]; got != "jetlet/n1" {
		t.Errorf("ce-source = %q", got)
	}
	if b, err := json.Marshal(ce); err != nil || bytes.Contains(b, []byte(`"data"`)) {
		t.Errorf("attributes alone: %s (%v), want no data", b, err)
	}
}

// natsBinaryMessage is a NATS message as the CloudEvents NATS binding reads
// one in binary mode: a header ce-<attribute> per attribute, its value
// percent-decoded; content-type is datacontenttype (as the SDK's NATS
// bindings read it); the body is the data.
type natsBinaryMessage struct {
	header map[string][]string
	body   []byte
}

var natsSpecs = spec.WithPrefix("ce-")

func (m natsBinaryMessage) ReadEncoding() binding.Encoding { return binding.EncodingBinary }

func (m natsBinaryMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m natsBinaryMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	version := natsSpecs.Version(first(m.header[natsSpecs.PrefixedSpecVersionName()]))
	if version == nil {
		return binding.ErrNotBinary
	}
	for k, vs := range m.header {
		v, err := url.PathUnescape(first(vs))
		if err != nil {
			return fmt.Errorf("header %s: %w", k, err)
		}
		switch attr := version.Attribute(k); {
		case attr != nil:
			err = w.SetAttribute(attr, v)
		case strings.HasPrefix(k, "ce-"):
			err = w.SetExtension(strings.TrimPrefix(k, "ce-"), v)
		case strings.EqualFold(k, schemas.ContentTypeHeader):
			err = w.SetAttribute(version.AttributeFromKind(spec.DataContentType), v)
		}
		if err != nil {
			return err
		}
	}
	return w.SetData(bytes.NewReader(m.body))
}

func (m natsBinaryMessage) Finish(error) error { return nil }

// GetAttribute and GetExtension are binding.MessageMetadataReader's, which
// ToEvent asks of a binary message.
func (m natsBinaryMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	version := natsSpecs.Version(first(m.header[natsSpecs.PrefixedSpecVersionName()]))
	if version == nil {
		return nil, nil
	}
	attr := version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if v := first(m.header[attr.PrefixedName()]); v != "" {
		return attr, v
	}
	return attr, nil
}

func (m natsBinaryMessage) GetExtension(name string) any {
	if v := first(m.header["ce-"+name]); v != "" {
		return v
	}
	return nil
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
