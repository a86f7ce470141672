package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// MovedFromAnnotation is set on each pod Drain and Replay re-create on
// another node: NODE/UID of the pod it was re-created from. A run again
// finds the pods it moved already by it.
const MovedFromAnnotation = "jetlet.dev/moved-from"

// MoveOptions say how Drain and Replay move a node's pods.
type MoveOptions struct {
	// Grace is each drained pod's grace period before its containers are
	// killed (nil: its own terminationGracePeriodSeconds).
	Grace *int64
	// At is the moment whose desired state Replay re-creates (zero: the
	// last); Drain ignores it.
	At time.Time
	// Parallel is how many pods are moved at once (default 10).
	Parallel int
	// OnCordoned is called when Drain cordoned the node (it was not).
	OnCordoned func()
	// OnLeft is called for each pod left where it is: it ended
	// (Succeeded, Failed), its work done.
	OnLeft func(*Pod)
	// OnDone is called once per pod moved or failed, one call at a time,
	// in the order they finish, with the pod's events while it was waited
	// for (Move.Events).
	OnDone func(m *Move, done, total int, err error)
}

// Move is one pod re-created on another node: from its newest apply intent
// on its node.
type Move struct {
	From   *Pod
	Source *IntentRecord // the apply intent it is re-created from
	// To is its intent on the target, once planned; To.Unchanged: a run
	// before re-created it already.
	To *Intent
	// Running: its copy runs on the target (or ran to completion).
	Running bool
	// Deleted: Drain deleted it from its node.
	Deleted bool
	// Events are the pods' events while their results were waited for.
	Events []schemas.LifecycleEvent
}

// Drain moves the pods of live node from to live node to, as kubectl drain
// evicts them: it cordons from, then, opts.Parallel pods at a time,
// re-creates each live pod's newest apply on to (a new uid, annotated
// MovedFromAnnotation), waits for it to run there, and deletes it from
// from. Pods that ended stay. Run again, it goes on where it stopped: a pod
// it re-created already is found by its annotation, never created twice.
// It returns how many of how many pods moved; ctx ending stops it.
func (c *Client) Drain(ctx context.Context, from, to string, opts MoveOptions) (moved, total int, err error) {
	if err := c.checkMove(ctx, from, to, false); err != nil {
		return 0, 0, err
	}
	resp, err := c.Cordon(ctx, from, true)
	if err != nil {
		return 0, 0, fmt.Errorf("cordon %s before draining it: %w", from, err)
	}
	if resp.Changed && opts.OnCordoned != nil {
		opts.OnCordoned()
	}
	return c.moveAll(ctx, from, to, time.Time{}, true, opts)
}

// Replay re-creates on live node to the pods that lost node from was to
// run at opts.At (its last desired state when zero): each pod whose newest
// intent by then applies it, but those that ended. Refused while from is
// live: Drain a live node. Run again, it re-creates nothing twice.
func (c *Client) Replay(ctx context.Context, from, to string, opts MoveOptions) (moved, total int, err error) {
	if err := c.checkMove(ctx, from, to, true); err != nil {
		return 0, 0, err
	}
	return c.moveAll(ctx, from, to, opts.At, false, opts)
}

// checkMove refuses a move the nodes cannot take: to not live or
// cordoned; for a drain from not live, for a replay from live.
func (c *Client) checkMove(ctx context.Context, from, to string, replay bool) error {
	switch {
	case !schemas.ValidNodeName(from):
		return errorOf(ErrInvalid, nil, "%q is not a node name (a DNS-1123 label)", from)
	case !schemas.ValidNodeName(to):
		return errorOf(ErrInvalid, nil, "--to %q: want the node the pods move to (a DNS-1123 label)", to)
	case to == from:
		return errorOf(ErrInvalid, nil, "--to %s: the pods are on %s already", to, from)
	}
	nodes, err := c.NodesOf(ctx, "", nil)
	if err != nil {
		return err
	}
	var src, dst *Node
	for _, n := range nodes {
		switch n.Name {
		case from:
			src = n
		case to:
			dst = n
		}
	}
	now := time.Now()
	if !dst.Live(now) {
		return fmt.Errorf("--to %s: the node is not live (%s)", to, dst.NotLive(now))
	}
	if dst.Record.Unschedulable {
		return fmt.Errorf("--to %s: the node is cordoned (jetlet node uncordon %s)", to, to)
	}
	switch {
	case replay && src.Live(now):
		return fmt.Errorf("node %s is live: replay is for a node that is gone; `jetlet node drain %s --to %s` moves the pods of a live one", from, from, to)
	case !replay && !src.Live(now):
		return fmt.Errorf("node %s is not live (%s): a drain deletes its pods there; `jetlet node replay %s --to %s` re-creates the pods of a lost node", from, src.NotLive(now), from, to)
	}
	return nil
}

// moves lists the pods of from to move: those whose newest intent by at
// (any, when zero) applies them, and that have not ended.
func (c *Client) moves(ctx context.Context, from string, at time.Time, onLeft func(*Pod)) ([]*Move, error) {
	pods, err := c.Pods(ctx, from)
	if err != nil {
		return nil, err
	}
	var newest map[string]*IntentRecord // uid → its newest intent by at
	if !at.IsZero() {
		all, err := c.Intents(ctx, from, "*", false)
		if err != nil {
			return nil, err
		}
		newest = map[string]*IntentRecord{}
		for i := range all {
			if !all[i].Published.After(at) {
				newest[all[i].UID] = &all[i]
			}
		}
	}
	var moves []*Move
	for _, p := range pods {
		last := p.LastIntent
		if newest != nil {
			last = newest[p.UID]
		}
		switch {
		case last == nil || last.Op != schemas.OpApply:
			continue // deleted, or not yet asked for at that moment
		case p.Status != nil && (p.Status.Phase == schemas.PhaseSucceeded || p.Status.Phase == schemas.PhaseFailed):
			if onLeft != nil { // its work is done: not run again
				onLeft(p)
			}
			continue
		}
		moves = append(moves, &Move{From: p, Source: last})
	}
	return moves, nil
}

// moveAll moves the pods, opts.Parallel at a time, and reports each.
func (c *Client) moveAll(ctx context.Context, from, to string, at time.Time, drain bool, opts MoveOptions) (moved, total int, err error) {
	moves, err := c.moves(ctx, from, at, opts.OnLeft)
	if err != nil {
		return 0, 0, err
	}
	parallel := opts.Parallel
	if parallel < 1 {
		parallel = 10
	}
	var mu sync.Mutex // orders the reports, and guards done and moved
	done := 0
	next := make(chan *Move)
	var wg sync.WaitGroup
	for range min(parallel, len(moves)) {
		wg.Go(func() {
			for m := range next {
				err := c.move(ctx, m, to, drain, opts.Grace)
				mu.Lock()
				done++
				if err == nil {
					moved++
				}
				if opts.OnDone != nil {
					opts.OnDone(m, done, len(moves), err)
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
	return moved, len(moves), ctx.Err()
}

// move re-creates m on to, unless a run before did, waits for it to run
// there, and, draining, deletes it from its node.
func (c *Client) move(ctx context.Context, m *Move, to string, drain bool, grace *int64) error {
	if err := c.planMove(ctx, m, to); err != nil {
		return err
	}
	if err := c.publishAndWait(ctx, m, m.To); err != nil {
		return err
	}
	if err := c.waitRunning(ctx, m.To); err != nil {
		return err
	}
	m.Running = true
	if !drain {
		return nil
	}
	revision, err := c.NextRevision(ctx, m.From)
	if err != nil {
		return err
	}
	del, err := DeleteIntent(m.From, revision, grace)
	if err != nil {
		return err
	}
	if err := c.publishAndWait(ctx, m, del); err != nil {
		return err
	}
	m.Deleted = true
	return nil
}

// planMove plans the pod's apply intent for to from its source intent: the
// same pod, without its uid, revision and node, annotated with where it
// comes from. A pod of the same name there that a move made from this one
// is the same pod: unchanged, published again only if it differs. One that
// did not come from this pod is left alone.
func (c *Client) planMove(ctx context.Context, m *Move, to string) error {
	body, err := c.IntentBody(ctx, m.From.Node, m.Source.Seq)
	if err != nil {
		return err
	}
	var envelope map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var pod map[string]any
	if err := dec.Decode(&envelope); err == nil {
		pod, _ = envelope["pod"].(map[string]any)
	}
	if pod == nil {
		return fmt.Errorf("intent %d holds no pod jetlet can read", m.Source.Seq)
	}
	origin := m.From.Node + "/" + m.From.UID
	delete(envelope, "revision")
	envelope["op"] = string(schemas.OpApply)
	md, _ := pod["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		pod["metadata"] = md
	}
	delete(md, "uid")
	annotations, _ := md["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		md["annotations"] = annotations
	}
	annotations[MovedFromAnnotation] = origin
	if spec, ok := pod["spec"].(map[string]any); ok {
		delete(spec, "nodeName")
	}
	p := c.NewPlanner()
	there, err := p.Existing(ctx, to, m.From.Namespace, m.From.Name)
	if err != nil {
		return err
	}
	if there != nil {
		have, err := c.IntentPod(ctx, to, there.LastIntent.Seq)
		if err != nil {
			return err
		}
		if have == nil || have.Annotations[MovedFromAnnotation] != origin {
			return fmt.Errorf("a pod of that name runs on %s already (uid %s), not moved from %s: left on %s", to, there.UID, origin, m.From.Node)
		}
	}
	m.To, err = p.Plan(ctx, to, envelope)
	return err
}

// publishAndWait publishes in (unless unchanged) and waits for its result,
// which must be Synced.
func (c *Client) publishAndWait(ctx context.Context, m *Move, in *Intent) error {
	if in.Unchanged {
		// Published by a run before this one: its result may be stored.
		in.Duplicate = true
	} else if err := c.Publish(ctx, in); err != nil {
		return err
	}
	res, err := c.Wait(ctx, in, WaitOptions{OnEvent: func(ev *schemas.LifecycleEvent) { m.Events = append(m.Events, *ev) }})
	if err != nil && res == nil {
		return err
	}
	if res.Outcome != schemas.OutcomeSynced {
		return fmt.Errorf("%s on %s: %s: %s", in.label(), in.Node, res.Outcome, res.Error)
	}
	return nil
}

// waitRunning waits for in's pod to run (or to have run to completion):
// Synced is one sync done, and a pod with init containers is Pending
// after it.
func (c *Client) waitRunning(ctx context.Context, in *Intent) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.Status(ctx, in.Node, in.UID)
		if err != nil {
			return err
		}
		if st != nil {
			switch st.Phase {
			case schemas.PhaseRunning, schemas.PhaseSucceeded:
				return nil
			case schemas.PhaseFailed:
				return fmt.Errorf("%s on %s failed: %s %s", in.label(), in.Node, st.Reason, st.Message)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s on %s is not Running yet: %w", in.label(), in.Node, ctx.Err())
		case <-tick.C:
		}
	}
}
