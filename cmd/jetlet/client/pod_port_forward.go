package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

type portForwardOptions struct {
	client  clientFlags
	uid     string
	address string
}

// forwardedPort is one [LOCAL:]REMOTE argument.
type forwardedPort struct {
	local  int // 0: the kernel picks one
	remote int32
}

func newPortForwardCommand() *cobra.Command {
	var o portForwardOptions
	cmd := &cobra.Command{
		Use:   "port-forward NAMESPACE/NAME | --uid UID [LOCAL:]REMOTE...",
		Short: "Forward local ports to a pod's ports, through the pod's node",
		Long: `Listen on local ports and carry each connection to a port of the pod, as
kubectl port-forward: one stream over NATS per connection through the pod's
node (docs/wire-protocol.md section 12), the operator's alone. The node
carries a port's connections on one connection to the runtime, as kubectl
does.

REMOTE alone listens on the same port locally; :REMOTE or 0:REMOTE on a port
the kernel picks. It runs until interrupted.`,
		Example: `  jetlet port-forward default/web 8080:80
  jetlet port-forward default/web :80 9090`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVar(&o.uid, "uid", "", "the pod's uid, instead of NAMESPACE/NAME")
	fs.StringVar(&o.address, "address", "127.0.0.1", "the local address to listen on")
	cli.AnnotateEnv(fs)
	return cmd
}

func parseForwardedPort(arg string) (forwardedPort, error) {
	local, remote, found := strings.Cut(arg, ":")
	if !found {
		remote = local
	}
	var p forwardedPort
	r, err := strconv.ParseUint(remote, 10, 16)
	if err != nil || r == 0 {
		return p, fmt.Errorf("%q: the pod's port must be 1 to 65535", arg)
	}
	p.remote = int32(r)
	if local != "" {
		l, err := strconv.ParseUint(local, 10, 16)
		if err != nil {
			return p, fmt.Errorf("%q: the local port must be 0 to 65535", arg)
		}
		p.local = int(l)
	}
	return p, nil
}

func (o *portForwardOptions) run(cmd *cobra.Command, args []string) error {
	podArgs, portArgs := args[:1], args[1:]
	if o.uid != "" {
		podArgs, portArgs = nil, args
	}
	if len(portArgs) == 0 {
		return errors.New("name the ports: [LOCAL:]REMOTE...")
	}
	ports := make([]forwardedPort, len(portArgs))
	for i, a := range portArgs {
		var err error
		if ports[i], err = parseForwardedPort(a); err != nil {
			return err
		}
	}
	c, pod, err := namedPod(cmd, &o.client, podArgs, o.uid)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(o.address, strconv.Itoa(p.local)))
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
		fmt.Fprintf(cmd.OutOrStdout(), "Forwarding from %s -> %d\n", l.Addr(), p.remote)
	}
	session := jc.NewPortForwardSession()
	var conns sync.WaitGroup
	defer conns.Wait()
	var accepting sync.WaitGroup
	for i, l := range listeners {
		accepting.Go(func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				conns.Go(func() {
					if err := c.PortForward(ctx, pod, ports[i].remote, session, conn); err != nil && ctx.Err() == nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "jetlet: a connection to port %d: %v\n", ports[i].remote, err)
					}
				})
			}
		})
	}
	<-ctx.Done()
	for _, l := range listeners {
		l.Close()
	}
	accepting.Wait()
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return nil // interrupted, as kubectl port-forward
	}
	return context.Cause(ctx)
}
