// Package outcome holds what running a probe's or a hook's handler found. It
// imports nothing, so that reconcile (which names it
// kubecontainer.HandlerOutcome) and runtime/probe (which produces it) share
// the type without either importing the other, as runtime/crierr does for the
// CRI's errors.
package outcome

// Outcome is what running one handler found.
type Outcome struct {
	// OK: the command exited 0, the HTTP status was 2xx or 3xx, the TCP
	// connection opened, the gRPC health service answered SERVING.
	OK bool
	// Message says why not, for Unhealthy and FailedPostStartHook events
	// (the command's output, the HTTP status, the dial error); on success it
	// carries what kubelet would log or warn about (the output, a redirect
	// to another host).
	Message string
}
