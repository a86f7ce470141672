package schemas

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// CloudEvents 1.0 (https://github.com/cloudevents/spec): what a lifecycle
// event is as a CloudEvent. The publisher puts the attributes on each event's
// NATS message as headers (binary content mode of the NATS protocol binding,
// the body unchanged); `jetlet events -o cloudevents` prints the event in
// structured mode (the JSON event format, the event as data).
const (
	CloudEventsSpecVersion = "1.0"
	// CloudEventTypePrefix precedes the event's type in the CloudEvent's
	// type: dev.jetlet.ContainerDied.
	CloudEventTypePrefix = "dev.jetlet."
	// CloudEventSourcePrefix precedes the node's name in the source:
	// jetlet/n1.
	CloudEventSourcePrefix = "jetlet/"
	// CloudEventDataContentType is the body's media type, the event's JSON.
	CloudEventDataContentType = "application/json"
	// CloudEventHeaderPrefix precedes each attribute's name in its NATS
	// header (the NATS binding's section 3.1.3.1: lower case, `ce-`).
	CloudEventHeaderPrefix = "ce-"
	// ContentTypeHeader also names the body's media type. The NATS binding
	// maps datacontenttype to ce-datacontenttype and reads a message as
	// structured only when Content-Type is application/cloudevents...; the
	// CloudEvents Go SDK's NATS binding reads datacontenttype from
	// content-type. Both are set, with the same value.
	ContentTypeHeader = "content-type"
)

// CloudEvent is a lifecycle event as a CloudEvent: its context attributes
// and, in structured mode, the event itself as data.
type CloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Time            time.Time `json:"time"`
	Subject         string    `json:"subject"`
	DataContentType string    `json:"datacontenttype"`
	// Data is the event's JSON, as stored in JETLET_EVENTS (structured mode
	// only; in binary mode it is the message's body).
	Data json.RawMessage `json:"data,omitempty"`
}

// CloudEventOf returns ev's CloudEvents attributes: the event's id, source
// jetlet/<node>, type dev.jetlet.<Type>, its time, subject
// <namespace>/<pod>. Data is left empty.
func CloudEventOf(ev *LifecycleEvent) CloudEvent {
	return CloudEvent{
		SpecVersion:     CloudEventsSpecVersion,
		ID:              ev.ID,
		Source:          CloudEventSourcePrefix + ev.Node,
		Type:            CloudEventTypePrefix + string(ev.Type),
		Time:            ev.Time,
		Subject:         ev.Namespace + "/" + ev.Pod,
		DataContentType: CloudEventDataContentType,
	}
}

// SetHeaders puts the attributes in h (a nats.Header) as binary content
// mode's headers: ce-specversion, ce-id, ce-source, ce-type, ce-time
// (RFC 3339), ce-subject, ce-datacontenttype, and content-type; each value
// percent-encoded as the binding's section 3.1.3.2 says.
func (ce *CloudEvent) SetHeaders(h map[string][]string) {
	set := func(attr, v string) { h[CloudEventHeaderPrefix+attr] = []string{percentEncodeHeader(v)} }
	set("specversion", ce.SpecVersion)
	set("id", ce.ID)
	set("source", ce.Source)
	set("type", ce.Type)
	set("time", ce.Time.Format(time.RFC3339Nano))
	set("subject", ce.Subject)
	set("datacontenttype", ce.DataContentType)
	h[ContentTypeHeader] = []string{ce.DataContentType}
}

// percentEncodeHeader encodes space, double quote, percent and every byte
// outside printable ASCII as %XY (the NATS and HTTP bindings' rule); a
// value needing none comes back as it is.
func percentEncodeHeader(s string) string {
	plain := func(c byte) bool { return c > ' ' && c < 0x7f && c != '"' && c != '%' }
	i := 0
	for i < len(s) && plain(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if c := s[i]; plain(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
