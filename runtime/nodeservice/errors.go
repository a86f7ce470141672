package nodeservice

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetlet/jetlet/schemas"
)

// replyError is an error the client is told, with its code
// (schemas.ServiceErr*).
type replyError struct {
	code int
	msg  string
}

func (e *replyError) Error() string { return e.msg }

func replyErrorf(code int, format string, args ...any) error {
	return &replyError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errShuttingDown answers what arrives while the node stops.
var errShuttingDown = replyErrorf(schemas.ServiceErrUnavailable, "the node is shutting down")

// codeOf is the code and sentence a client is told of err.
func codeOf(err error) (int, string) {
	if re, ok := errors.AsType[*replyError](err); ok {
		return re.code, re.msg
	}
	return schemas.ServiceErrInternal, err.Error()
}

// respondError answers a request with err, within its handler, so the
// service framework's stats count it.
func respondError(r micro.Request, err error) error {
	code, msg := codeOf(err)
	return r.Error(strconv.Itoa(code), msg, nil)
}

// publishError answers on reply with err from a request's own goroutine.
func publishError(nc *nats.Conn, reply string, err error) error {
	code, msg := codeOf(err)
	return nc.PublishMsg(&nats.Msg{Subject: reply, Header: nats.Header{
		schemas.HeaderServiceError:     {msg},
		schemas.HeaderServiceErrorCode: {strconv.Itoa(code)},
	}})
}
