package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// TestDeniedIsCountedAndLogged: every denial is counted by kind; one that no
// call is watching is logged at error with its subject, one that a call
// watches (and handles) at debug.
func TestDeniedIsCountedAndLogged(t *testing.T) {
	var logs bytes.Buffer
	a := newAgent(runConfig{node: "n1"})
	a.cfg.streams.SetDefaults()
	a.log = zerolog.New(&logs)
	a.deniedTotal = newDeniedCounter(prometheus.NewRegistry())
	watched, stop := a.denials.Watch(t.Context(), "$JS.API.STREAM")
	defer stop()
	a.denied(&natsjs.PermissionError{Op: "publish", Subject: "jetlet.result.n1.u1"})
	a.denied(&natsjs.PermissionError{Op: "publish", Subject: "$KV.jetlet_status.n1.u1"})
	a.denied(&natsjs.PermissionError{Op: "publish", Subject: "$KV.jetlet_status.n1.u2"})
	a.denied(&natsjs.PermissionError{Op: "publish", Subject: "$JS.API.STREAM.UPDATE.JETLET_INTENTS"})
	for what, want := range map[string]float64{"result": 1, "status": 2, "stream": 1, "event": 0} {
		if got := testutil.ToFloat64(a.deniedTotal.WithLabelValues(what)); got != want {
			t.Errorf("jetlet_permission_denied_total{what=%q} = %v, want %v", what, got, want)
		}
	}
	if _, ok := natsjs.Denied(watched); !ok {
		t.Error("the watched call was not told")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4:\n%s", len(lines), logs.String())
	}
	for i, want := range []string{
		`"level":"error","op":"publish","subject":"jetlet.result.n1.u1","what":"result"`,
		`"level":"error","op":"publish","subject":"$KV.jetlet_status.n1.u1","what":"status"`,
		`"level":"error","op":"publish","subject":"$KV.jetlet_status.n1.u2","what":"status"`,
		`"level":"debug","op":"publish","subject":"$JS.API.STREAM.UPDATE.JETLET_INTENTS"`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("log line %d %s does not contain %s", i, lines[i], want)
		}
	}
}
