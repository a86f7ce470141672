package nodeclient

import (
	"context"

	"github.com/nats-io/nats.go"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/schemas"
)

// Stats asks node for its usage and its pods', a Summary as kubelet's
// /stats/summary answers.
func Stats(ctx context.Context, nc *nats.Conn, subj schemas.Subjects, node string) (*statsapi.Summary, error) {
	return request[*statsapi.Summary](ctx, nc, subj.NodeService(node, schemas.EndpointStats), struct{}{})
}
