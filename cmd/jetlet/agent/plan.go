package agent

import (
	"context"
	"encoding/json"

	"github.com/jetlet/jetlet/reconcile/nodestatus"
	"github.com/jetlet/jetlet/schemas"
)

// plan is the node's plan for an intent of pod uid (the node service's plan
// endpoint): the Rejected error validation would give, else the pod
// workers' plan. It stores nothing and changes nothing.
func (p *pipeline) plan(ctx context.Context, uid string, intent []byte) (schemas.PodPlan, error) {
	in, err := p.consumer.Decode(uid, intent)
	if err != nil {
		plan := schemas.PodPlan{Node: p.node.name, UID: uid, Rejected: err.Error()}
		// What a pod the node refuses needs of the declared features says
		// why no node of its kind would take it; a body that is no pod at
		// all has nothing to say.
		var raw schemas.PodIntent
		if json.Unmarshal(intent, &raw) == nil && raw.Pod != nil {
			plan.MissingFeatures, _ = nodestatus.MissingFeatures(raw.Pod, nil, p.declaredFeatures)
		}
		return plan, nil
	}
	return p.workers.Plan(ctx, uid, in)
}
