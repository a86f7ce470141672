package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// AppliedSpec is the spec of the pod's newest apply intent still kept, with
// the defaults the node applies, or nil (also when these credentials may
// not read intents).
func (c *Client) AppliedSpec(ctx context.Context, p *Pod) (*corev1.PodSpec, error) {
	all, err := c.readableIntents(ctx, p.Node, p.UID, false)
	if err != nil {
		return nil, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Op != schemas.OpApply {
			continue
		}
		pod, err := c.IntentPod(ctx, p.Node, all[i].Seq)
		if err != nil || pod == nil {
			return nil, err // nil: not a pod jetlet could read either, it was Rejected
		}
		schemas.SetPodDefaults(pod) // the probes as the node runs them
		return &pod.Spec, nil
	}
	return nil, nil
}

// NewestEvents returns the newest n events of pod uid on node (uid "" or
// "*" for all its pods), oldest first, of those that happened by until
// (any, when it is zero); with lastPerType, of the newest event of each pod
// and type only.
func (c *Client) NewestEvents(ctx context.Context, node, uid string, n int, lastPerType bool, until time.Time) ([]schemas.LifecycleEvent, error) {
	if uid == "" {
		uid = "*"
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.subj.PodEvents(node, uid)}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if lastPerType {
		cfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	}
	var out []schemas.LifecycleEvent
	err := c.readStream(ctx, schemas.StreamEvents, cfg, false, func(msg jetstream.Msg) error {
		if !until.IsZero() {
			if md, err := msg.Metadata(); err == nil && md.Timestamp.After(until.Add(resultLag)) {
				return errReadEnough
			}
		}
		var ev schemas.LifecycleEvent
		if json.Unmarshal(msg.Data(), &ev) == nil && (until.IsZero() || !ev.Time.After(until)) {
			out = append(out, ev)
			if len(out) > n {
				out = out[1:]
			}
		}
		return nil
	})
	if errors.Is(err, errReadEnough) {
		err = nil
	}
	return out, err
}

// Status returns the status of pod uid on node in jetlet_status, nil when
// there is none.
func (c *Client) Status(ctx context.Context, node, uid string) (*schemas.PodStatus, error) {
	e, err := c.getKV(ctx, schemas.BucketStatus, schemas.StatusKey(node, uid))
	if err != nil || e == nil {
		return nil, err
	}
	var st schemas.PodStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// getKV is the entry of key in bucket, nil when there is none.
func (c *Client) getKV(ctx context.Context, bucket, key string) (jetstream.KeyValueEntry, error) {
	kv, err := c.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	var e jetstream.KeyValueEntry
	err = c.ridingOut(ctx, "bucket "+bucket, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, nil
	case err != nil:
		return nil, c.jsError("bucket "+bucket, err)
	}
	return e, nil
}

// WatchStatuses hands fn the statuses of node's pods ("" for every node):
// first every current one at once (initial true), then each change as it
// comes, until ctx ends (nil) or fn fails (its error).
func (c *Client) WatchStatuses(ctx context.Context, node string, fn func(statuses []schemas.PodStatus, initial bool) error) error {
	kv, err := c.bucket(ctx, schemas.BucketStatus)
	if err != nil {
		return err
	}
	w, err := kv.Watch(ctx, nodeToken(node)+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return c.jsError("bucket "+schemas.BucketStatus, err)
	}
	defer w.Stop()
	var initial []schemas.PodStatus
	listed := false
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return nil
		case entry, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watching bucket %s: the watch ended", schemas.BucketStatus)
			}
			e = entry
		}
		if e == nil { // every current value is in
			listed = true
			if err := fn(initial, true); err != nil {
				return err
			}
			continue
		}
		var st schemas.PodStatus
		if json.Unmarshal(e.Value(), &st) != nil {
			continue
		}
		if !listed {
			initial = append(initial, st)
			continue
		}
		if err := fn([]schemas.PodStatus{st}, false); err != nil {
			return err
		}
	}
}

// PodAges finds when each pod was first asked for: the first of its
// intents the intents stream still holds (a direct get per pod,
// remembered). Not safe for concurrent use.
type PodAges struct {
	c *Client
	// partitions is the intents'; 0 when they cannot be read, or these
	// credentials may not read them (an auditor's: pod specs may hold
	// secrets).
	partitions int
	streams    map[string]jetstream.Stream // by name, as looked up
	first      map[string]time.Time
}

// NewPodAges returns an empty PodAges.
func (c *Client) NewPodAges(ctx context.Context) *PodAges {
	n, err := c.intentPartitions(ctx)
	if err != nil {
		n = 0 // no ages known
	}
	return &PodAges{c: c, partitions: n, streams: map[string]jetstream.Stream{}, first: map[string]time.Time{}}
}

// Since is when p's first intent was stored, zero when that is not known.
func (a *PodAges) Since(ctx context.Context, p *schemas.PodStatus) time.Time {
	key := schemas.StatusKey(p.Node, p.UID)
	if t, ok := a.first[key]; ok {
		return t
	}
	var t time.Time
	if a.partitions > 0 {
		name := schemas.IntentsStream(p.Node, a.partitions)
		var msg *jetstream.RawStreamMsg
		err := a.c.ridingOut(ctx, "stream "+name, func(ctx context.Context) error {
			return natsjs.UnlessDenied(ctx, &a.c.denied.Denials, "$JS.API.DIRECT.GET."+name, func(ctx context.Context) (err error) {
				s := a.streams[name]
				if s == nil {
					if s, err = a.c.js.Stream(ctx, name); err != nil {
						return err
					}
					a.streams[name] = s
				}
				msg, err = s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(a.c.subj.Intent(p.Node, p.UID)))
				return err
			})
		})
		switch {
		case err == nil:
			t = msg.Time
		case errors.As(err, new(*natsjs.PermissionError)):
			a.partitions = 0 // denied at once, and again for every pod
		}
	}
	a.first[key] = t
	return t
}

// PodResources is a pod with what its spec asks for.
type PodResources struct {
	Status *schemas.PodStatus
	Since  time.Time // when it was first asked for (PodAges), zero if unknown
	// Known is false when no apply intent of the pod is kept: its requests
	// and limits are not known.
	Known            bool
	Requests, Limits corev1.ResourceList
}

// PodResourcesOf returns each of statuses with the requests and limits of
// its newest apply intent, as kubelet sums them (init containers,
// sidecars, overhead).
func (c *Client) PodResourcesOf(ctx context.Context, statuses []schemas.PodStatus) ([]PodResources, error) {
	ages := c.NewPodAges(ctx)
	out := make([]PodResources, len(statuses))
	for i := range statuses {
		p := &statuses[i]
		spec, err := c.AppliedSpec(ctx, &Pod{Node: p.Node, UID: p.UID})
		if err != nil {
			return nil, err
		}
		out[i] = PodResources{Status: p, Since: ages.Since(ctx, p)}
		if spec != nil {
			pod := &corev1.Pod{Spec: *spec}
			out[i].Known = true
			out[i].Requests = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
			out[i].Limits = resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
		}
	}
	return out, nil
}
