package nodeservice

import (
	"context"

	"github.com/nats-io/nats.go/micro"
)

// stats answers with the node's usage, a Summary.
func (s *Service) stats(ctx context.Context, r micro.Request) {
	summary, err := s.cfg.Summary(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("usage not measured")
		_ = respondError(r, err)
		return
	}
	if err := r.RespondJSON(summary); err != nil {
		s.log.Warn().Err(err).Msg("stats reply not sent")
	}
}
