package shim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The runtime speaks to a pod shim over the unix socket SocketName in the
// sandbox directory: one JSON request per connection, answered by one JSON
// response. An exec's stdin, stdout and stderr travel with its request as
// SCM_RIGHTS; its answer comes when it has exited, and a connection closed
// before that kills it. An attach's streams travel the same way; after its
// request the runtime sends the client's terminal sizes (WindowSize, one JSON
// value each, for a tty container); its answer comes when it ends (the
// container exited, or its stdin ended), and a connection closed before that
// detaches it.
const SocketName = "shim.sock"

// Request ops.
const (
	OpStart  = "start"  // start the container in Dir (spec.json written)
	OpExec   = "exec"   // run Args in the running container of Dir
	OpAttach = "attach" // attach Streams to the running container of Dir
	OpReopen = "reopen" // reopen the CRI log of the running container of Dir
)

// Attach streams, as named in Request.Streams.
const (
	StreamStdin  = "stdin"
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Request is one call to a pod shim.
type Request struct {
	Op   string   `json:"op"`
	Dir  string   `json:"dir"`
	Args []string `json:"args,omitempty"`
	// Tty (OpExec) makes the exec's stdin, a terminal, its controlling
	// terminal.
	Tty bool `json:"tty,omitempty"`
	// Streams (OpAttach) names the files sent with the request, in order.
	Streams []string `json:"streams,omitempty"`
}

// WindowSize is a terminal size, sent on an attach's connection.
type WindowSize struct {
	Width  uint16 `json:"width"`
	Height uint16 `json:"height"`
}

// Response answers a Request.
type Response struct {
	Error    string `json:"error,omitempty"`
	State    *State `json:"state,omitempty"`     // OpStart
	ExitCode int32  `json:"exit_code,omitempty"` // OpExec
}

// Call sends req, with files as SCM_RIGHTS, to the shim of sandboxDir and
// waits for its answer until ctx ends (which, for an exec, kills it). An
// answer with Error set is returned as an error.
func Call(ctx context.Context, sandboxDir string, req Request, files ...*os.File) (*Response, error) {
	return call(ctx, sandboxDir, req, nil, files)
}

// Attach is Call for an OpAttach whose client may resize its terminal: each
// size from sizes is sent to the shim while the attach lasts.
func Attach(ctx context.Context, sandboxDir string, req Request, sizes <-chan WindowSize, files ...*os.File) (*Response, error) {
	return call(ctx, sandboxDir, req, sizes, files)
}

func call(ctx context.Context, sandboxDir string, req Request, sizes <-chan WindowSize, files []*os.File) (*Response, error) {
	conn, err := dial(sandboxDir)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	if err := sendMsg(conn, append(data, '\n'), oob); err != nil {
		return nil, callErr(ctx, err)
	}
	if sizes != nil {
		answered := make(chan struct{})
		defer close(answered)
		go sendSizes(conn, sizes, answered)
	}
	var resp Response
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&resp); err != nil {
		return nil, callErr(ctx, fmt.Errorf("pod shim gave no answer: %w", err))
	}
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}

// sendSizes sends each size on conn until the call is answered.
func sendSizes(conn *os.File, sizes <-chan WindowSize, answered <-chan struct{}) {
	enc := json.NewEncoder(conn)
	for {
		select {
		case size, ok := <-sizes:
			if !ok {
				return
			}
			if enc.Encode(size) != nil {
				return
			}
		case <-answered:
			return
		}
	}
}

func callErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// dial connects to the shim's socket through a descriptor of the sandbox
// directory, so that a long data dir cannot push the path past the 108 bytes
// a unix socket address holds.
func dial(sandboxDir string) (*os.File, error) {
	dir, err := os.OpenFile(sandboxDir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("pod shim: %w", err)
	}
	defer dir.Close()
	conn, err := dialUnix(filepath.Join("/proc/self/fd", fmt.Sprint(dir.Fd()), SocketName))
	if err != nil {
		return nil, fmt.Errorf("pod shim of %s: %w", sandboxDir, err)
	}
	return conn, nil
}
