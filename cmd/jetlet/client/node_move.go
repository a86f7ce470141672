package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

// movedFromAnnotation is set on each pod `node drain` and `node replay`
// re-create on another node: the node and uid it was re-created from,
// NODE/UID. A re-run finds the pods it moved already by it.
const movedFromAnnotation = "jetlet.dev/moved-from"

type nodeMoveOptions struct {
	client   clientFlags
	to       string
	grace    int64
	at       string
	timeout  time.Duration
	parallel int
	replay   bool // replay: re-create a lost node's pods; else drain a live one
}

func newNodeDrainCommand() *cobra.Command {
	var o nodeMoveOptions
	cmd := &cobra.Command{
		Use:   "drain NAME --to OTHER [--grace S]",
		Short: "Move a node's pods to another node: cordon it, re-create each pod there, then delete it here",
		Long: `Cordon NAME, then, --parallel pods at a time, publish each live pod's newest apply intent for
OTHER (a new uid, the old node and uid in the annotation ` + movedFromAnnotation + `),
wait for it to run there, and delete it from NAME with --grace (its
own grace period by default). Pods that ended (Succeeded, Failed) stay where
they are: their work is done. Interrupted and run again, it goes on where it stopped: a pod it
re-created already is found by its annotation, never created twice. Both
nodes must be live; OTHER must not be cordoned. Needs the operator's NATS
credentials.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	fs := cmd.Flags()
	fs.Int64Var(&o.grace, "grace", -1, "seconds each pod on NAME is given to stop (-1: its own terminationGracePeriodSeconds)")
	o.register(cmd)
	return cmd
}

func newNodeReplayCommand() *cobra.Command {
	o := nodeMoveOptions{replay: true}
	cmd := &cobra.Command{
		Use:   "replay NAME --to OTHER [--at TIME]",
		Short: "Re-create on another node the pods a lost node was to run",
		Long: `Read from the intents stream the desired state NAME had at --at (its last,
by default): each pod whose newest intent by then applies it, but those that
ended (Succeeded, Failed). Publish each
for OTHER (a new uid, the old node and uid in the annotation
` + movedFromAnnotation + `) and wait for it to run there. Refused while NAME is
live: drain a live node. Run again, it re-creates nothing twice. Needs the
scheduler's or the operator's NATS credentials.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	cmd.Flags().StringVar(&o.at, "at", "", "the moment whose desired state is replayed: RFC 3339, or a duration ago (10m); default: the last")
	o.register(cmd)
	return cmd
}

func (o *nodeMoveOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.to, "to", "", "the node the pods move to (required)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long the whole move may take")
	fs.IntVar(&o.parallel, "parallel", 10, "pods moved at once")
	o.client.register(fs)
	cli.AnnotateEnv(fs)
}

func (o *nodeMoveOptions) run(cmd *cobra.Command, from string) error {
	switch {
	case !schemas.ValidNodeName(from):
		return fmt.Errorf("%q is not a node name (a DNS-1123 label)", from)
	case !schemas.ValidNodeName(o.to):
		return fmt.Errorf("--to %q: want the node the pods move to (a DNS-1123 label)", o.to)
	case o.to == from:
		return fmt.Errorf("--to %s: the pods are on %s already", o.to, from)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %s: must be positive", o.timeout)
	case o.parallel < 1:
		return fmt.Errorf("--parallel %d: must be at least 1", o.parallel)
	}
	var at time.Time
	if o.at != "" {
		var err error
		if at, err = parseAt(o.at, time.Now()); err != nil {
			return err
		}
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	out := cmd.OutOrStdout()
	if err := o.checkNodes(ctx, c, from); err != nil {
		return err
	}
	if !o.replay {
		resp, err := c.cordon(ctx, from, true)
		if err != nil {
			return fmt.Errorf("cordon %s before draining it: %w", from, err)
		}
		if resp.Changed {
			fmt.Fprintf(out, "node/%s cordoned\n", from)
		}
	}
	moves, err := o.movesOf(ctx, c, from, at, out)
	if err != nil {
		return err
	}
	moved := o.moveAll(ctx, c, moves, out, cmd.ErrOrStderr())
	if ctx.Err() != nil {
		return fmt.Errorf("%d of %d pods moved, then: %w; run it again to go on", moved, len(moves), ctx.Err())
	}
	verb := "drained"
	if o.replay {
		verb = "replayed"
	}
	fmt.Fprintf(out, "node/%s %s to %s: %d of %d pods moved\n", from, verb, o.to, moved, len(moves))
	if moved < len(moves) {
		return cli.ExitCodeError{Code: 2}
	}
	return nil
}

// checkNodes refuses a move the nodes cannot take: OTHER not live or
// cordoned; for a drain NAME not live, for a replay NAME live.
func (o *nodeMoveOptions) checkNodes(ctx context.Context, c *client, from string) error {
	states, err := c.nodeStates(ctx, "", nil)
	if err != nil {
		return err
	}
	now := time.Now()
	if why := notLive(states[o.to], now); why != "" {
		return fmt.Errorf("--to %s: the node is not live (%s)", o.to, why)
	}
	if states[o.to].Record.Unschedulable {
		return fmt.Errorf("--to %s: the node is cordoned (jetlet node uncordon %s)", o.to, o.to)
	}
	why := notLive(states[from], now)
	switch {
	case o.replay && why == "":
		return fmt.Errorf("node %s is live: replay is for a node that is gone; `jetlet node drain %s --to %s` moves the pods of a live one", from, from, o.to)
	case !o.replay && why != "":
		return fmt.Errorf("node %s is not live (%s): a drain deletes its pods there; `jetlet node replay %s --to %s` re-creates the pods of a lost node", from, why, from, o.to)
	}
	return nil
}

// move is one pod to re-create on the target: the newest apply intent it
// had on its node.
type move struct {
	from   *podRecord
	intent *intentRecord
}

func (m move) label() string { return "pod/" + m.from.Namespace + "/" + m.from.Name }

// movesOf lists the pods to move: those of from whose newest intent by at
// (any, when zero) applies them, and that have not ended. It says on out
// which it leaves.
func (o *nodeMoveOptions) movesOf(ctx context.Context, c *client, from string, at time.Time, out io.Writer) ([]move, error) {
	pods, err := c.knownPods(ctx, from)
	if err != nil {
		return nil, err
	}
	var newest map[string]*intentRecord // uid → its newest intent by at
	if !at.IsZero() {
		all, err := c.intents(ctx, from, "*", false)
		if err != nil {
			return nil, err
		}
		newest = map[string]*intentRecord{}
		for i := range all {
			if !all[i].Published.After(at) {
				newest[all[i].UID] = &all[i]
			}
		}
	}
	var moves []move
	for _, p := range pods {
		last := p.LastIntent
		if newest != nil {
			last = newest[p.UID]
		}
		switch {
		case last == nil || last.Op != schemas.OpApply:
			continue // deleted, or not yet asked for at that moment
		case p.Status != nil && isEnded(p.Status.Phase): // its work is done: not run again
			fmt.Fprintf(out, "%s: left on %s (%s)\n", "pod/"+p.Namespace+"/"+p.Name, from, p.Status.Phase)
			continue
		}
		moves = append(moves, move{from: p, intent: last})
	}
	return moves, nil
}

func isEnded(phase schemas.PodPhase) bool {
	return phase == schemas.PhaseSucceeded || phase == schemas.PhaseFailed
}

// moveAll moves the pods, o.parallel at a time, as kubectl drain evicts
// them at once; each pod's report goes to out, its events to progress,
// whole, once it is done. It returns how many moved.
func (o *nodeMoveOptions) moveAll(ctx context.Context, c *client, moves []move, out, progress io.Writer) (moved int) {
	var mu sync.Mutex // orders the reports, and guards done and moved
	done := 0
	next := make(chan move)
	var wg sync.WaitGroup
	for range min(o.parallel, len(moves)) {
		wg.Go(func() {
			for m := range next {
				var report, events bytes.Buffer
				err := o.move(ctx, c, m, &report, &events)
				mu.Lock()
				done++
				fmt.Fprintf(out, "[%d/%d] %s\n%s", done, len(moves), m.label(), report.Bytes())
				_, _ = progress.Write(events.Bytes())
				if err != nil {
					fmt.Fprintf(progress, "error: %s: %v\n", m.label(), err)
				} else {
					moved++
				}
				mu.Unlock()
			}
		})
	}
	for _, m := range moves {
		select {
		case next <- m:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return moved
}

// move re-creates m on the target, unless a run before did, waits for it
// to run there, and, draining, deletes it from its node. It says what it
// did on out, and shows the pods' events on progress.
func (o *nodeMoveOptions) move(ctx context.Context, c *client, m move, out, progress io.Writer) error {
	pi, err := o.planMove(ctx, c, m)
	if err != nil {
		return err
	}
	if err := o.publishAndWait(ctx, c, pi, progress); err != nil {
		return err
	}
	if err := waitRunning(ctx, c, pi); err != nil {
		return err
	}
	there := ""
	if pi.unchanged {
		there = " (there already)"
	}
	fmt.Fprintf(out, "  on %s as uid %s%s\n", pi.node, pi.uid, there)
	if o.replay {
		return nil
	}
	del := &deleteOptions{grace: o.grace}
	dpi, err := del.plan(ctx, c, m.from)
	if err != nil {
		return err
	}
	if err := o.publishAndWait(ctx, c, dpi, progress); err != nil {
		return err
	}
	fmt.Fprintf(out, "  deleted from %s\n", m.from.Node)
	return nil
}

// planMove builds the pod's apply intent for the target from its newest
// apply intent: the same pod, without its uid and node, annotated with where
// it comes from. A pod of the same name there that a move made from this one
// is the same pod: unchanged, published again only if it differs. One that
// did not come from this pod is left alone.
func (o *nodeMoveOptions) planMove(ctx context.Context, c *client, m move) (*plannedIntent, error) {
	body, err := c.intentBody(ctx, m.from.Node, m.intent.Seq)
	if err != nil {
		return nil, err
	}
	docs, err := parseManifest(body, fmt.Sprintf("intent %d of node %s", m.intent.Seq, m.from.Node))
	if err != nil || len(docs) != 1 || docs[0].pod == nil {
		return nil, fmt.Errorf("intent %d holds no pod jetlet can read: %v", m.intent.Seq, err)
	}
	d := docs[0]
	origin := m.from.Node + "/" + m.from.UID
	delete(d.envelope, "revision")
	d.envelope["op"] = string(schemas.OpApply)
	md := d.metadata()
	delete(md, "uid")
	annotations, _ := md["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		md["annotations"] = annotations
	}
	annotations[movedFromAnnotation] = origin
	if spec, ok := d.pod["spec"].(map[string]any); ok {
		delete(spec, "nodeName")
	}
	p := newPlanner(c, o.to)
	there, err := p.existing(ctx, o.to, d.namespace(), d.name())
	if err != nil {
		return nil, err
	}
	if there != nil {
		pod, err := c.intentPod(ctx, o.to, there.LastIntent.Seq)
		if err != nil {
			return nil, err
		}
		if pod == nil || pod.Annotations[movedFromAnnotation] != origin {
			return nil, fmt.Errorf("a pod of that name runs on %s already (uid %s), not moved from %s: left on %s", o.to, there.UID, origin, m.from.Node)
		}
	}
	return p.plan(ctx, d)
}

// waitRunning waits for pi's pod to run (or to have run to completion):
// Synced is one sync done, and a pod with init containers is Pending
// after it.
func waitRunning(ctx context.Context, c *client, pi *plannedIntent) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		e, err := c.getKV(ctx, schemas.BucketStatus, schemas.StatusKey(pi.node, pi.uid))
		if err != nil {
			return err
		}
		var st schemas.PodStatus
		if e != nil && json.Unmarshal(e.Value(), &st) == nil {
			switch st.Phase {
			case schemas.PhaseRunning, schemas.PhaseSucceeded:
				return nil
			case schemas.PhaseFailed:
				return fmt.Errorf("%s on %s failed: %s %s", pi.label, pi.node, st.Reason, st.Message)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s on %s is not Running yet: %w", pi.label, pi.node, ctx.Err())
		case <-tick.C:
		}
	}
}

// publishAndWait publishes pi (unless unchanged) and waits for its result,
// which must be Synced.
func (o *nodeMoveOptions) publishAndWait(ctx context.Context, c *client, pi *plannedIntent, progress io.Writer) error {
	marks, err := c.marks(ctx)
	if err != nil {
		return err
	}
	if !pi.unchanged {
		if err := c.publishIntent(ctx, pi); err != nil {
			return err
		}
	}
	if pi.unchanged || pi.duplicate {
		// Published by a run before this one: its result may be stored.
		pi.duplicate = true
	}
	res, _, err := c.waitResult(ctx, pi, marks, progress)
	if err != nil {
		return err
	}
	if res.Outcome != schemas.OutcomeSynced {
		return fmt.Errorf("%s on %s: %s: %s", pi.label, pi.node, res.Outcome, res.Error)
	}
	return nil
}
