package client

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

type copyOptions struct {
	client    clientFlags
	container string
}

func newCopyCommand() *cobra.Command {
	var o copyOptions
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and trees into and out of a container, through the pod's node",
		Long: `Copy a file or a tree between this machine and a container, as kubectl cp:
one of SRC and DST is NAMESPACE/NAME:PATH (or NAME:PATH, in "default"), the
other a local path; DST becomes the copy of SRC. It is tar over an exec
stream (docs/wire-protocol.md section 12), so the container needs a tar, and
it is the operator's alone. Modes and symbolic links are kept; a copy out of a
container writes nothing outside DST (a local path with a colon starts with
./ or /).`,
		Example: `  jetlet cp default/web:/etc/nginx ./nginx
  jetlet cp ./site default/web:/usr/share/html -c app`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVarP(&o.container, "container", "c", "", "the container's name (default: the pod's only container)")
	cli.AnnotateEnv(fs)
	return cmd
}

// remotePath splits NAMESPACE/NAME:PATH; ok is false for a local path.
func remotePath(arg string) (pod, path string, ok bool) {
	if strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return "", "", false
	}
	pod, path, ok = strings.Cut(arg, ":")
	return pod, path, ok
}

func (o *copyOptions) run(cmd *cobra.Command, args []string) error {
	srcPod, srcPath, fromPod := remotePath(args[0])
	dstPod, dstPath, toPod := remotePath(args[1])
	switch {
	case fromPod == toPod:
		return errors.New("one of SRC and DST is NAMESPACE/NAME:PATH, the other a local path")
	case fromPod && srcPath == "", toPod && dstPath == "":
		return errors.New("NAMESPACE/NAME:PATH needs a path after the colon")
	}
	podArg := srcPod
	if toPod {
		podArg = dstPod
	}
	c, pod, err := namedPod(cmd, &o.client, []string{podArg}, "")
	if err != nil {
		return err
	}
	defer c.Close()
	if fromPod {
		return c.CopyFrom(cmd.Context(), pod, o.container, srcPath, args[1], prefixed{cmd.ErrOrStderr()})
	}
	return c.CopyTo(cmd.Context(), pod, o.container, args[0], dstPath)
}

// prefixed writes each warning after "jetlet: ".
type prefixed struct{ w io.Writer }

func (p prefixed) Write(b []byte) (int, error) {
	_, err := fmt.Fprintf(p.w, "jetlet: %s", b)
	return len(b), err
}
