// Package nodeclient asks a node's service for container logs, exec and its cordon
// (docs/wire-protocol.md section 12): the client half of the protocol
// runtime/nodeservice serves, with nothing of the node in it.
package nodeclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetlet/jetlet/schemas"
)

// ServiceError is an error reply of a node's service.
type ServiceError struct {
	Code        int
	Description string
}

func (e *ServiceError) Error() string { return e.Description }

// ErrNoNode: no node serves the subject asked (not running, or another
// node's name).
var ErrNoNode = errors.New("no node answered: is it running?")

// FirstReplyTimeout bounds the wait for a node's first reply.
const FirstReplyTimeout = 10 * time.Second

// replyError returns the error a reply carries, if any.
func replyErr(m *nats.Msg) error {
	if m.Header.Get("Status") == "503" { // the server's no-responders status
		return ErrNoNode
	}
	desc := m.Header.Get(schemas.HeaderServiceError)
	if desc == "" {
		return nil
	}
	code, _ := strconv.Atoi(m.Header.Get(schemas.HeaderServiceErrorCode))
	return &ServiceError{Code: code, Description: desc}
}

// Exec asks node to run req's command and returns its outcome.
func Exec(ctx context.Context, nc *nats.Conn, subj schemas.Subjects, node string, req schemas.ExecRequest) (schemas.ExecResponse, error) {
	return request[schemas.ExecResponse](ctx, nc, subj.NodeService(node, schemas.EndpointExec), req)
}

// Cordon asks node to cordon itself (unschedulable) or to uncordon, and
// returns its cordon once done.
func Cordon(ctx context.Context, nc *nats.Conn, subj schemas.Subjects, node string, unschedulable bool) (schemas.CordonResponse, error) {
	return request[schemas.CordonResponse](ctx, nc, subj.NodeService(node, schemas.EndpointCordon), schemas.CordonRequest{Unschedulable: unschedulable})
}

// Plan asks node for its plan for the intent body of pod uid, acting on
// nothing.
func Plan(ctx context.Context, nc *nats.Conn, subj schemas.Subjects, node, uid string, intent []byte) (schemas.PodPlan, error) {
	return request[schemas.PodPlan](ctx, nc, subj.NodeService(node, schemas.EndpointPlan), schemas.PlanRequest{UID: uid, Intent: intent})
}

// request sends req to a node's endpoint on subject and decodes its one
// reply.
func request[Resp any](ctx context.Context, nc *nats.Conn, subject string, req any) (Resp, error) {
	var resp Resp
	body, err := json.Marshal(req)
	if err != nil {
		return resp, err
	}
	m, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: body})
	if errors.Is(err, nats.ErrNoResponders) {
		return resp, ErrNoNode
	}
	if err != nil {
		return resp, err
	}
	if err := replyErr(m); err != nil {
		return resp, err
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return resp, fmt.Errorf("reply on %s: %w", subject, err)
	}
	return resp, nil
}

// Logs asks node for the log req names and writes it to out as it comes,
// granting credit for each chunk once written and at least every
// schemas.LogKeepalive. It returns the end's reason (schemas.LogEnd*).
func Logs(ctx context.Context, nc *nats.Conn, subj schemas.Subjects, node string, req schemas.LogsRequest, out io.Writer) (string, error) {
	if req.Window == 0 {
		req.Window = schemas.DefaultLogWindow
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	inbox := nc.NewInbox()
	// Room for the window, the opening, the end and a keepalive's worth.
	msgs := make(chan *nats.Msg, req.Window+4)
	sub, err := nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return "", err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishMsg(&nats.Msg{Subject: subj.NodeService(node, schemas.EndpointLogs), Reply: inbox, Data: body}); err != nil {
		return "", err
	}
	first := time.NewTimer(FirstReplyTimeout)
	defer first.Stop()
	keepalive := time.NewTicker(schemas.LogKeepalive)
	defer keepalive.Stop()
	var (
		creditSubject string
		seq           int64 = -1 // the opening is chunk 0
	)
	grant := func() error {
		if creditSubject == "" {
			return nil
		}
		b, _ := json.Marshal(schemas.LogCredit{Seq: seq})
		return nc.Publish(creditSubject, b)
	}
	for {
		var m *nats.Msg
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-first.C:
			return "", fmt.Errorf("node %s did not answer within %s", node, FirstReplyTimeout)
		case <-keepalive.C:
			if err := grant(); err != nil {
				return "", err
			}
			continue
		case m = <-msgs:
			first.Stop()
		}
		if err := replyErr(m); err != nil {
			return "", err
		}
		got, err := strconv.ParseInt(m.Header.Get(schemas.HeaderLogSeq), 10, 64)
		if end := m.Header.Get(schemas.HeaderLogEnd); end != "" {
			if err != nil || got != seq {
				return "", fmt.Errorf("log stream ended after chunk %s, but chunk %d was the last received: chunks were lost", m.Header.Get(schemas.HeaderLogSeq), seq)
			}
			return end, nil
		}
		if err != nil || got != seq+1 {
			return "", fmt.Errorf("log stream: chunk %s after %d: chunks were lost", m.Header.Get(schemas.HeaderLogSeq), seq)
		}
		seq = got
		creditSubject = m.Header.Get(schemas.HeaderLogCredit)
		if _, err := out.Write(m.Data); err != nil {
			return "", err
		}
		if err := grant(); err != nil {
			return "", err
		}
	}
}
