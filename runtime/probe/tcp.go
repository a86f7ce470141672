package probe

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/jetlet/jetlet/runtime/probe/outcome"
)

// TCPSocket opens a TCP connection to hostPort within timeout and closes it:
// a connection opened is OK.
func (r *Runner) TCPSocket(ctx context.Context, hostPort string, timeout time.Duration) (outcome.Outcome, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		if ctx.Err() != nil {
			return outcome.Outcome{}, fmt.Errorf("tcpSocket %s: %w", hostPort, ctx.Err())
		}
		return outcome.Outcome{Message: err.Error()}, nil
	}
	_ = conn.Close() // a close error says nothing about the container's health
	return outcome.Outcome{OK: true}, nil
}
