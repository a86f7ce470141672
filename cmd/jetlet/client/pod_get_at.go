package client

import (
	"context"
	"fmt"
	"time"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// parseAt reads --at: a duration ago or an RFC 3339 time.
func parseAt(s string, now time.Time) (time.Time, error) {
	t, err := parseSince(s, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at %q: want a duration ago like 10m or 2h, or an RFC 3339 time like 2025-01-02T15:04:05Z", s)
	}
	return t, nil
}

// statuses are the pods' statuses that get pods lists: those of
// jetlet_status, or with at set, those of podsAt.
func (o *getPodsOptions) statuses(ctx context.Context, c *jc.Client, at time.Time) ([]schemas.PodStatus, error) {
	if at.IsZero() {
		return c.Statuses(ctx, o.client.node)
	}
	pods, err := c.PodsAt(ctx, o.client.node, at)
	if err != nil {
		return nil, err
	}
	out := make([]schemas.PodStatus, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Status)
	}
	return out, nil
}

// rowsAt renders pods as they were at at: ages to then, and none Unknown.
func (o *getPodsOptions) rowsAt(ctx context.Context, c *jc.Client, pods []schemas.PodStatus, at time.Time) [][]string {
	ages := c.NewPodAges(ctx)
	rows := make([][]string, len(pods))
	for i := range pods {
		rows[i] = o.row(&pods[i], true, podSince(ctx, ages, &pods[i]), at)
	}
	return rows
}
