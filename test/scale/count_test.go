package scale_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
)

// msgCounter counts the messages the pipeline exchanges with the servers, by
// kind: JetStream API requests (consumer creates, pulls, infos), acks by
// their body, KV puts by bucket, and publications by stream.
type msgCounter struct {
	mu     sync.Mutex // guards counts, written by the subscriptions' goroutines
	counts map[string]int
}

func countMessages(b *testing.B, nc *nats.Conn) *msgCounter {
	b.Helper()
	c := &msgCounter{counts: map[string]int{}}
	for _, subject := range []string{"$JS.API.>", "$JS.ACK.>", "$KV.>", "jetlet.>"} {
		sub, err := nc.Subscribe(subject, c.count)
		if err != nil {
			b.Fatal(err)
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	return c
}

func (c *msgCounter) count(m *nats.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[kindOf(m)]++
}

// kindOf names a message's kind from its subject, without the names of
// streams, consumers, nodes and pods.
func kindOf(m *nats.Msg) string {
	t := strings.Split(m.Subject, ".")
	switch {
	case t[0] == "$JS" && t[1] == "API" && len(t) >= 4 && t[2] == "CONSUMER" && t[3] == "MSG":
		return "api CONSUMER.MSG.NEXT"
	case t[0] == "$JS" && t[1] == "API" && len(t) >= 4:
		return "api " + t[2] + "." + t[3]
	case t[0] == "$JS" && t[1] == "API":
		return "api " + t[2]
	case t[0] == "$JS" && t[1] == "ACK":
		body := string(m.Data)
		if body == "" {
			body = "+ACK"
		}
		return "ack " + strings.Fields(body)[0]
	case t[0] == "$KV":
		return "kv put " + t[1]
	default:
		return "pub " + t[0] + "." + t[1]
	}
}

func (c *msgCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}

// perIntent lists each kind's count divided by intents.
func (c *msgCounter) perIntent(intents int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(c.counts)) {
		out = append(out, fmt.Sprintf("%s %.2f", k, float64(c.counts[k])/float64(intents)))
	}
	return strings.Join(out, ", ")
}
