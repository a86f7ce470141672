package client

import (
	"context"
	"fmt"
	"io"
	"time"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// exitNodeNotLive is apply --wait's exit status when a pod's node has no live
// heartbeat: its intent is published, but no result can be awaited.
const exitNodeNotLive = 3

// checkNodesLive warns on w of each node of plans (those to be published)
// with no live heartbeat in jetlet_nodes, and marks its plans so that --wait
// does not wait for a result that cannot come.
func checkNodesLive(ctx context.Context, c *jc.Client, plans []*plannedIntent, w io.Writer) error {
	now := time.Now()
	down := map[string]string{} // node → why it is not live ("" when live)
	for _, pi := range plans {
		if pi.Unchanged {
			continue
		}
		why, seen := down[pi.Node]
		if !seen {
			states, err := nodeStates(ctx, c, pi.Node, nil)
			if err != nil {
				return err
			}
			why = states[pi.Node].NotLive(now)
			down[pi.Node] = why
			if why != "" {
				fmt.Fprintf(w, "warning: node %s has no live heartbeat in %s (%s): its intents wait in %s until its jetlet runs\n",
					pi.Node, schemas.BucketNodes, why, schemas.StreamIntents)
			}
		}
		pi.nodeDown = why
	}
	return nil
}
