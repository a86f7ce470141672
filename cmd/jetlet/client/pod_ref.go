package client

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// nodeToken is the subject token that selects node, or every node.
func nodeToken(node string) string { return cmp.Or(node, "*") }

// parsePodRef reads NAMESPACE/NAME (or NAME, in "default") or --uid; exactly
// one of them must be given.
func parsePodRef(args []string, uid string) (jc.PodRef, error) {
	switch {
	case len(args) == 0 && uid == "":
		return jc.PodRef{}, fmt.Errorf("name the pod: NAMESPACE/NAME or --uid UID")
	case len(args) > 0 && uid != "":
		return jc.PodRef{}, fmt.Errorf("give NAMESPACE/NAME or --uid, not both")
	case len(args) > 1:
		return jc.PodRef{}, fmt.Errorf("one pod at a time: got %d arguments", len(args))
	case uid != "":
		if !schemas.ValidUID(uid) {
			return jc.PodRef{}, fmt.Errorf("--uid %q: not a pod UID (1 to 128 of A-Z a-z 0-9 _ -)", uid)
		}
		return jc.PodRef{UID: uid}, nil
	}
	ns, name, found := strings.Cut(strings.TrimPrefix(args[0], "pod/"), "/")
	if !found {
		ns, name = "default", ns
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return jc.PodRef{}, fmt.Errorf("%q: want NAMESPACE/NAME", args[0])
	}
	return jc.PodRef{Namespace: ns, Name: name}, nil
}

// namedPods connects and returns the known pods that args (NAMESPACE/NAME)
// or uid name, oldest first; none is an error. The caller closes the client.
func namedPods(cmd *cobra.Command, f *clientFlags, args []string, uid string) (*jc.Client, []*jc.Pod, error) {
	ref, err := parsePodRef(args, uid)
	if err != nil {
		return nil, nil, err
	}
	c, err := connectClient(cmd, f)
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.FindPods(cmd.Context(), f.node, ref)
	if err == nil && len(pods) == 0 {
		err = jc.PodNotFound(ref, f.node)
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, pods, nil
}
