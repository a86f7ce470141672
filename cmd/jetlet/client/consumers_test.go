package client

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/testimages"
)

// TestClientCommandsLeaveNoConsumers: every read a client command makes
// through a consumer deletes it when done, so that scripting the CLI cannot
// fill the server's consumer limit (docs/contract.md section 8).
func TestClientCommandsLeaveNoConsumers(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	before := c.consumers()

	commands := [][]string{
		{"apply", "-f", examples + "web.yaml", "--wait"},
		{"apply", "-f", examples + "web.yaml", "--wait", "-o", "json"},
		{"get", "pods"},
		{"get", "pods", "-o", "wide"},
		{"get", "pods", "-o", "json"},
		{"get", "nodes"},
		{"events"},
		{"events", "--pod", "default/web"},
		{"events", "--since", "1h", "-o", "json"},
		{"events", "--type", "ContainerStarted"},
		{"history", "default/web"},
		{"history", "default/web", "-o", "json"},
		{"delete", "default/web", "--wait"},
		{"get", "pods"},
		{"events", "--pod", "default/web"},
		{"history", "default/web"},
		{"apply", "-f", examples + "web.yaml"},
		{"delete", "default/web"},
		{"get", "nodes", "-o", "json"},
		{"image", "ls"},
		{"image", "ls", "-o", "json"},
	}
	var archive bytes.Buffer
	if err := testimages.WriteOCILayout(&archive, map[string]v1.Image{"app:1": randomImage(t, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.runIn(archive.String(), "image", "push", "app:1", "-"), 0)
	for _, args := range commands {
		wantCode(t, c.run(args...), 0)
	}
	// A follow ends when its context does.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if res := runCLI(ctx, "", "events", "-f", "--nats-url", c.url); res.code != 0 {
		t.Errorf("events -f: exit %d, stderr %q", res.code, res.stderr)
	}

	// A delete may race the create it undoes (a follow stopped at once):
	// wait for it, but not for the server's own clean-up after 10 s idle,
	// which would hide a command that never deletes.
	var after []string
	poll.Until(t, 5*time.Second, func() string {
		return fmt.Sprintf("after %d client commands the server has consumers %v; before them it had %v", len(commands)+1, after, before)
	}, func() bool { after = c.consumers(); return slices.Equal(after, before) })
}

// consumers lists every consumer of jetlet's streams and buckets, as
// "stream/name", sorted.
func (c *cluster) consumers() []string {
	c.t.Helper()
	var out []string
	for _, stream := range []string{
		schemas.StreamIntents, schemas.StreamResults, schemas.StreamEvents, schemas.StreamDead,
		"KV_" + schemas.BucketStatus, "KV_" + schemas.BucketNodes, natsjs.ObjectStoreStream(schemas.ObjectStoreImages),
	} {
		s, err := c.js.Stream(c.t.Context(), stream)
		if err != nil {
			c.t.Fatalf("stream %s: %v", stream, err)
		}
		names := s.ConsumerNames(c.t.Context())
		for name := range names.Name() {
			out = append(out, stream+"/"+name)
		}
		if err := names.Err(); err != nil {
			c.t.Fatalf("consumers of %s: %v", stream, err)
		}
	}
	slices.Sort(out)
	return out
}

// TestSoakCLIAgainstJetletRun scripts the CLI against one real `jetlet run`,
// as a scheduler that drives jetlet through it would: every command must
// succeed. JETLET_SOAK_COMMANDS sets how many (default 200; the operating
// issue measured 2,000).
func TestSoakCLIAgainstJetletRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	n := 200
	if s := os.Getenv("JETLET_SOAK_COMMANDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("JETLET_SOAK_COMMANDS=%q: want a positive number", s)
		}
	}
	const pods = 5
	var names []string
	for i := range pods {
		names = append(names, "soak-"+strconv.Itoa(i))
	}
	_, c := startJetletRun(t, names...)
	url := c.url

	failed := 0
	for i := range n {
		pod := "soak-" + strconv.Itoa(i/8%pods)
		var args []string
		stdin := ""
		switch i % 8 {
		case 0:
			args, stdin = []string{"apply", "-f", "-"}, podYAML(pod, "app")
		case 1:
			args = []string{"get", "pods"}
		case 2:
			args = []string{"events", "--pod", "default/" + pod}
		case 3:
			args = []string{"history", "default/" + pod}
		case 4:
			args = []string{"get", "nodes"}
		case 5:
			args = []string{"events", "--since", "1m", "-o", "json"}
		case 6:
			args = []string{"get", "pods", "-o", "wide"}
		case 7:
			args = []string{"delete", "default/" + pod, "--grace", "0"}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		res := runCLI(ctx, stdin, append(args, "--nats-url", url)...)
		cancel()
		if res.code != 0 {
			failed++
			if failed <= 5 {
				t.Errorf("command %d, jetlet %s: exit %d, stderr %q", i, strings.Join(args, " "), res.code, res.stderr)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d commands failed", failed, n)
	}
}
