package nodeservice

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/periodic"
	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/nodeservice/busstream"
	"github.com/jetlet/jetlet/schemas"
)

// logs resolves the container a request names and streams its log from a
// goroutine of its own.
func (s *Service) logs(ctx context.Context, nc *nats.Conn, r micro.Request) {
	var req schemas.LogsRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "logs request: %v", err))
		return
	}
	if err := req.Validate(); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "logs request: %v", err))
		return
	}
	c, err := s.resolve(ctx, req.PodRef, req.Previous)
	if err == nil && c.logPath == "" {
		err = replyErrorf(schemas.ServiceErrNotFound, "container %s of pod %s has no log file", c.name, c.pod)
	}
	if err != nil {
		_ = respondError(r, err)
		return
	}
	reply := r.Reply()
	if !s.serve(func() { s.stream(ctx, nc, reply, req, c) }) {
		_ = respondError(r, errShuttingDown)
	}
}

// stream sends the log of c to reply in chunks, as the client's credit
// allows, then the end; or an error; or nothing more once the client is
// gone.
func (s *Service) stream(ctx context.Context, nc *nats.Conn, reply string, req schemas.LogsRequest, c instance) {
	log := s.log.With().Str("pod", c.pod).Str("container", c.name).Bool("follow", req.Follow).Logger()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	window := req.Window
	if window == 0 {
		window = schemas.DefaultLogWindow
	}
	cr := busstream.NewCredit(window)
	creditSubject := s.subj.LogCredit(s.cfg.Node, nuid.Next())
	sub, err := nc.Subscribe(creditSubject, func(m *nats.Msg) {
		var g schemas.LogCredit
		if json.Unmarshal(m.Data, &g) == nil {
			cr.Grant(g.Seq)
		}
	})
	if err != nil {
		_ = publishError(nc, reply, err)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	go cr.Watch(ctx, cancel, s.cfg.ClientTimeout)

	opts := containerlogs.ReadOptions{Tail: -1, Timestamps: req.Timestamps, Follow: req.Follow}
	if req.TailLines != nil {
		opts.Tail = *req.TailLines
	}
	if req.SinceTime != nil {
		opts.Since = *req.SinceTime
	}
	var exited chan struct{}
	if req.Follow {
		exited = make(chan struct{})
		opts.Exited = exited
		go s.watchExit(ctx, c.id, exited)
	}
	w := &chunkWriter{ctx: ctx, nc: nc, reply: reply, credit: cr, creditSubject: creditSubject}
	// The opening, chunk 0, tells the client where to grant credit before
	// any line comes (a follow of a quiet container).
	if err := w.publish(nil); err != nil {
		log.Debug().Err(err).Msg("log stream not opened")
		return
	}
	err = containerlogs.Read(ctx, c.logPath, opts, bufio.NewWriterSize(w, schemas.LogChunkSize))
	switch {
	case err == nil:
		end := schemas.LogEndEOF
		if req.Follow {
			end = schemas.LogEndExited
		}
		err = nc.PublishMsg(&nats.Msg{Subject: reply, Header: nats.Header{
			schemas.HeaderLogEnd: {end},
			schemas.HeaderLogSeq: {strconv.FormatInt(w.seq, 10)},
		}})
	case errors.Is(context.Cause(ctx), busstream.ErrPeerGone):
		log.Debug().Int64("chunks", w.seq).Msg("log stream stopped: the client went away")
		return
	case ctx.Err() != nil:
		err = publishError(nc, reply, errShuttingDown)
	default:
		log.Warn().Err(err).Msg("log stream failed")
		err = publishError(nc, reply, err)
	}
	if err != nil {
		log.Debug().Err(err).Msg("log stream's last message not sent")
	}
}

// watchExit closes exited once container id is no longer running.
func (s *Service) watchExit(ctx context.Context, id string, exited chan<- struct{}) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	periodic.Every(ctx, s.cfg.ExitPoll, func() {
		st, err := s.rt.ContainerStatus(ctx, id, false)
		if errors.Is(err, crierr.ErrNotFound) || (err == nil && st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING) {
			close(exited)
			stop()
		}
	})
}

// chunkWriter publishes what is written to it as numbered chunks of at
// most schemas.LogChunkSize, each once the client's credit allows it. It
// belongs to its stream's goroutine.
type chunkWriter struct {
	ctx           context.Context
	nc            *nats.Conn
	reply         string
	credit        *busstream.Credit
	creditSubject string
	seq           int64 // chunks sent
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		piece := p[:min(len(p), schemas.LogChunkSize)]
		if err := w.credit.Wait(w.ctx, w.seq+1); err != nil {
			return n, err
		}
		w.seq++
		if err := w.publish(piece); err != nil {
			return n, err
		}
		n += len(piece)
		p = p[len(piece):]
	}
	return n, nil
}

// publish sends chunk w.seq.
func (w *chunkWriter) publish(data []byte) error {
	return w.nc.PublishMsg(&nats.Msg{Subject: w.reply, Data: data, Header: nats.Header{
		schemas.HeaderLogSeq:    {strconv.FormatInt(w.seq, 10)},
		schemas.HeaderLogCredit: {w.creditSubject},
	}})
}
