package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// waitResult waits for the SyncResult answering pi, printing the pod's
// events to progress meanwhile. A Rejected result is a result, not an
// error: the command reports it.
func waitResult(ctx context.Context, c *jc.Client, pi *plannedIntent, progress io.Writer) (*jc.Result, error) {
	fmt.Fprintf(progress, "waiting for the result of intent %d on node %s...\n", pi.Seq, pi.Node)
	res, err := c.Wait(ctx, pi.Intent, jc.WaitOptions{OnEvent: func(ev *schemas.LifecycleEvent) {
		fmt.Fprintf(progress, "  %s\n", eventLine(ev))
	}})
	if errors.Is(err, jc.ErrRejected) {
		err = nil
	}
	return res, err
}

// eventLine describes an event in one line: "ContainerDied app: Error, exit code 1".
func eventLine(ev *schemas.LifecycleEvent) string {
	s := string(ev.Type)
	if ev.Container != "" {
		s += " " + ev.Container
	}
	detail := eventReason(ev)
	if ev.Message != "" {
		if detail != "" {
			detail += ": "
		}
		detail += ev.Message
	}
	if detail != "" {
		s += " (" + detail + ")"
	}
	return s
}

// eventReason is an event's reason and exit code: "Error, exit 1".
func eventReason(ev *schemas.LifecycleEvent) string {
	s := ev.Reason
	if ev.ExitCode != nil {
		if s != "" {
			s += ", "
		}
		s += "exit " + strconv.Itoa(int(*ev.ExitCode))
	}
	return s
}
