package agent

import (
	"context"

	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/userns"
	"github.com/jetlet/jetlet/runtime"
)

// subIDUser is whose entries in the subordinate id files are the node's
// range for pods' user namespaces, as kubelet takes user "kubelet"'s.
const subIDUser = "jetlet"

// userNamespaceRange is the host ids pods with hostUsers false take: the
// range of user subIDUser in /etc/subuid and /etc/subgid, else kubelet's
// default (every id but the host's first 65536).
func userNamespaceRange(log zerolog.Logger) (userns.NodeRange, error) {
	r, ok, err := userns.ReadSubIDs(subIDUser, "/etc/subuid", "/etc/subgid")
	if err != nil || !ok {
		return userns.DefaultNodeRange, err
	}
	log.Info().Uint32("first", r.First).Uint32("length", r.Length).Msg("user namespaces of pods: the range of user " + subIDUser + " in /etc/subuid and /etc/subgid")
	return r, nil
}

// supportsUserNamespaces reports whether the runtime's default handler says
// it runs pods in user namespaces with idmapped mounts (kubelet's
// HandlerSupportsUserNamespaces). A runtime that does not say so may ignore
// the request (containerd 1.6 does) and run the pod as the host's root.
func supportsUserNamespaces(st *runtimeapi.StatusResponse) bool {
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" {
			return h.GetFeatures().GetUserNamespaces()
		}
	}
	return false
}

// userNamespacesByDefault is whether pods that leave hostUsers unset get a
// user namespace: --default-host-users=false on a runtime that supports
// them. On one that does not, such pods run with the host's users, as they
// would without the flag (refusing them would make every pod of the node
// unrunnable for want of a default), and the node says so once.
func userNamespacesByDefault(defaultHostUsers, supported bool, log zerolog.Logger) bool {
	switch {
	case defaultHostUsers:
		return false
	case !supported:
		log.Warn().Msg("--default-host-users=false: the runtime does not support user namespaces, so pods that leave hostUsers unset run with the host's users")
		return false
	}
	log.Info().Msg("--default-host-users=false: pods that leave hostUsers unset get a user namespace of their own")
	return true
}

// runtimeSupportsUserNamespaces asks the runtime once, at start: a runtime
// that cannot answer is taken for one without them.
func runtimeSupportsUserNamespaces(ctx context.Context, client *runtime.Client, log zerolog.Logger) bool {
	st, err := client.Status(ctx, false)
	if err != nil {
		log.Warn().Err(err).Msg("runtime status unknown: pods with hostUsers false are rejected")
		return false
	}
	if !supportsUserNamespaces(st) {
		log.Info().Msg("the runtime does not support user namespaces: pods with hostUsers false are rejected")
		return false
	}
	return true
}
