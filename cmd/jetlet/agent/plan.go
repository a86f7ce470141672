package agent

import (
	"context"

	"github.com/jetlet/jetlet/schemas"
)

// plan is the node's plan for an intent of pod uid (the node service's plan
// endpoint): the Rejected error validation would give, else the pod
// workers' plan. It stores nothing and changes nothing.
func (p *pipeline) plan(ctx context.Context, uid string, intent []byte) (schemas.PodPlan, error) {
	in, err := p.consumer.Decode(uid, intent)
	if err != nil {
		return schemas.PodPlan{Node: p.node.name, UID: uid, Rejected: err.Error()}, nil
	}
	return p.workers.Plan(ctx, uid, in)
}
