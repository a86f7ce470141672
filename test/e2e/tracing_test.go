package e2e_test

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/jetlet/jetlet/test/otlptest"
	"github.com/jetlet/jetlet/test/poll"
)

// The scheduler's trace, as its traceparent header says.
const (
	schedulerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	schedulerSpan  = "00f067aa0ba902b7"
)

// publishTraced publishes an intent as a scheduler that traces it would.
func (n *node) publishTraced(uid, body string) {
	n.t.Helper()
	msg := nats.NewMsg("jetlet.intent." + n.name + "." + uid)
	msg.Data = []byte(body)
	msg.Header.Set("traceparent", "00-"+schedulerTrace+"-"+schedulerSpan+"-01")
	if _, err := n.js.PublishMsg(n.t.Context(), msg); err != nil {
		n.t.Fatal(err)
	}
}

// waitTrace waits until the receiver holds the spans named want of the
// scheduler's trace, and returns that trace's spans by name.
func waitTrace(t *testing.T, r *otlptest.Receiver, want ...string) map[string][]*tracepb.Span {
	t.Helper()
	var byName map[string][]*tracepb.Span
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("spans %q of the scheduler's trace; have %v", want, names(byName)) }, func() bool {
		spans, _ := r.Spans()
		byName = map[string][]*tracepb.Span{}
		for _, s := range spans {
			if hex.EncodeToString(s.GetTraceId()) == schedulerTrace {
				byName[s.GetName()] = append(byName[s.GetName()], s)
			}
		}
		for _, name := range want {
			if len(byName[name]) == 0 {
				return false
			}
		}
		return true
	})
	return byName
}

// tree renders the spans under parent (a hex span id) one per line,
// indented by depth, children in the order they started, with durations.
func tree(byName map[string][]*tracepb.Span, root *tracepb.Span, parent string) string {
	var all []*tracepb.Span
	for _, ss := range byName {
		all = append(all, ss...)
	}
	slices.SortFunc(all, func(a, b *tracepb.Span) int { return cmp.Compare(a.GetStartTimeUnixNano(), b.GetStartTimeUnixNano()) })
	var b strings.Builder
	var walk func(parent []byte, depth int)
	walk = func(parent []byte, depth int) {
		for _, s := range all {
			if bytes.Equal(s.GetParentSpanId(), parent) {
				d := time.Duration(s.GetEndTimeUnixNano() - s.GetStartTimeUnixNano())
				fmt.Fprintf(&b, "%s%s  %s\n", strings.Repeat("  ", depth), s.GetName(), d.Round(time.Microsecond))
				walk(s.GetSpanId(), depth+1)
			}
		}
	}
	p, _ := hex.DecodeString(parent)
	fmt.Fprintf(&b, "(scheduler span %s)\n", parent)
	walk(p, 1)
	return b.String()
}

func names(m map[string][]*tracepb.Span) []string {
	var out []string
	for name, spans := range m {
		out = append(out, fmt.Sprintf("%s x%d", name, len(spans)))
	}
	return out
}

// One trace per intent, continuing the scheduler's: the intent's span under
// the scheduler's, decode, sync and the result's publish under it, and one
// span per CRI call under the sync. The result carries the sync's span as
// its traceparent.
func TestAnIntentsTraceReachesAnOTLPReceiver(t *testing.T) {
	r, endpoint := otlptest.StartGRPC(t)
	n := startNodeEnv(t, shortDir(t), "", []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_BSP_SCHEDULE_DELAY=50",
	})
	n.publishTraced("traced", podJSON("traced", 1, "Always", "exec sleep 300"))
	res := n.results("traced", 1)[0]

	const (
		intent  = "jetlet.intent traced"
		runPod  = "runtime.v1.RuntimeService/RunPodSandbox"
		create  = "runtime.v1.RuntimeService/CreateContainer"
		started = "runtime.v1.RuntimeService/StartContainer"
	)
	spans := waitTrace(t, r, intent, "decode", "sync", "publish result", runPod, create, started)
	root := spans[intent][0]
	t.Logf("the intent's trace:\n%s", tree(spans, root, schedulerSpan))
	if got := hex.EncodeToString(root.GetParentSpanId()); got != schedulerSpan {
		t.Errorf("the intent's span has parent %s, want the scheduler's %s", got, schedulerSpan)
	}
	for _, name := range []string{"decode", "sync", "publish result"} {
		if s := spans[name][0]; !bytes.Equal(s.GetParentSpanId(), root.GetSpanId()) {
			t.Errorf("%s is not a child of the intent's span", name)
		}
	}
	sync := spans["sync"][0]
	for _, name := range []string{runPod, create, started} {
		if len(spans[name]) != 1 {
			t.Errorf("%d %s spans, want one per call", len(spans[name]), name)
			continue
		}
		if !bytes.Equal(spans[name][0].GetParentSpanId(), sync.GetSpanId()) {
			t.Errorf("%s is not a child of the sync's span", name)
		}
	}
	// Every CRI call of the trace (the sync reads the pod back too) is the
	// sync's; the relist's are in no intent's trace.
	for name, ss := range spans {
		for _, s := range ss {
			if strings.HasPrefix(name, "runtime.v1.") && !bytes.Equal(s.GetParentSpanId(), sync.GetSpanId()) {
				t.Errorf("%s in the intent's trace is not a child of the sync's span", name)
			}
		}
	}

	// The relist lists the runtime every second outside any intent: none of
	// those calls is exported (each would be a trace of its own).
	poll.Until(t, 10*time.Second, poll.Msg("three relists"), func() bool {
		resp, err := http.Get(n.proc.HTTPAddr() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^jetlet_relist_duration_seconds_count (\d+)$`).FindSubmatch(body)
		if m == nil {
			return false
		}
		count, _ := strconv.Atoi(string(m[1]))
		return count >= 3
	})
	// Spans are exported in the order they end: once a later intent's span
	// is in, so would the relists' be.
	n.publishTraced("later", deleteJSON("later", 1, 0))
	waitTrace(t, r, "jetlet.intent later")
	all, _ := r.Spans()
	for _, s := range all {
		if len(s.GetParentSpanId()) == 0 {
			t.Errorf("a root span %s was exported; jetlet's roots are intents, which have the scheduler's parent here", s.GetName())
		}
	}

	results, err := n.js.Stream(t.Context(), "JETLET_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := results.GetLastMsgForSubject(t.Context(), "jetlet.result.n1.traced")
	if err != nil {
		t.Fatal(err)
	}
	want := "00-" + schedulerTrace + "-" + hex.EncodeToString(sync.GetSpanId()) + "-01"
	if got := msgs.Header.Get("traceparent"); got != want || res.IntentSeq == 0 {
		t.Errorf("the result's traceparent is %q, want the sync's span %q", got, want)
	}
}

// OTLP over HTTP (protobuf), the protocol the OpenTelemetry SDK defaults to,
// and OTEL_SERVICE_NAME.
func TestTracesOverOTLPHTTP(t *testing.T) {
	r, endpoint := otlptest.StartHTTP(t)
	n := startNodeEnv(t, shortDir(t), "", []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=node-agent",
	})
	n.publishTraced("traced", deleteJSON("traced", 1, 0))
	n.results("traced", 1)
	waitTrace(t, r, "jetlet.intent traced", "publish result")
	spans, services := r.Spans()
	for i, s := range spans {
		if services[i] != "node-agent" {
			t.Errorf("span %s has service.name %q, want OTEL_SERVICE_NAME's", s.GetName(), services[i])
			break
		}
	}
}
