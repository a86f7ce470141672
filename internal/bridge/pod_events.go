package bridge

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// kubeEvent is how a jetlet lifecycle event reads as a Kubernetes Event:
// kubelet's type and reason, and its message when the jetlet event has
// none (a format of the container's name).
type kubeEvent struct {
	typ, reason, message string
}

// kubeEvents are the lifecycle events kubelet records too, under its
// reasons (pkg/kubelet/events); the others (a sandbox made or removed, a
// container removed, a stream opened) it does not record.
var kubeEvents = map[schemas.EventType]kubeEvent{
	schemas.EventContainerCreated:                {corev1.EventTypeNormal, "Created", "Created container: %s"},
	schemas.EventContainerStarted:                {corev1.EventTypeNormal, "Started", "Started container %s"},
	schemas.EventContainerKilled:                 {corev1.EventTypeNormal, "Killing", "Stopping container %s"},
	schemas.EventBackOff:                         {corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s"},
	schemas.EventImagePulled:                     {corev1.EventTypeNormal, "Pulled", "Container image pulled for %s"},
	schemas.EventImagePullFailed:                 {corev1.EventTypeWarning, "Failed", "Failed to pull image for %s"},
	schemas.EventUnhealthy:                       {corev1.EventTypeWarning, "Unhealthy", "Probe of %s failed"},
	schemas.EventFailedPostStartHook:             {corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook of %s failed"},
	schemas.EventFailedPreStopHook:               {corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook of %s failed"},
	schemas.EventFailedMount:                     {corev1.EventTypeWarning, "FailedMount", "A volume could not be mounted%s"},
	schemas.EventInvalidEnvironmentVariableNames: {corev1.EventTypeWarning, "InvalidEnvironmentVariableNames", "Keys skipped from envFrom of %s"},
	schemas.EventMissingClusterDNS:               {corev1.EventTypeWarning, "MissingClusterDNS", "The node has no cluster DNS%s"},
	schemas.EventDNSConfigForming:                {corev1.EventTypeWarning, "DNSConfigForming", "The DNS config was cut to the resolver's limits%s"},
	schemas.EventResizeStarted:                   {corev1.EventTypeNormal, "ResizeStarted", "Resize of %s started"},
	schemas.EventResizeCompleted:                 {corev1.EventTypeNormal, "ResizeCompleted", "Resize of %s completed"},
	schemas.EventResizeDeferred:                  {corev1.EventTypeWarning, "ResizeDeferred", "Resize of %s deferred"},
	schemas.EventResizeInfeasible:                {corev1.EventTypeWarning, "ResizeInfeasible", "Resize of %s infeasible"},
	schemas.EventResizeError:                     {corev1.EventTypeWarning, "ResizeError", "Resize of %s failed"},
	// A refusal's reason is the node's admission's (OutOfcpu, ...).
	schemas.EventIntentRejected: {corev1.EventTypeWarning, "", "The node refused the pod%s"},
}

// kubeEventOf is e as a Kubernetes Event; false for one kubelet would
// not record.
func kubeEventOf(e *schemas.LifecycleEvent) (kubeEvent, bool) {
	k, ok := kubeEvents[e.Type]
	if !ok {
		return k, false
	}
	k.reason = cmp.Or(k.reason, e.Reason, string(e.Type))
	if e.Message != "" {
		k.message = e.Message
	} else if e.Container != "" {
		k.message = fmt.Sprintf(k.message, e.Container)
	} else {
		k.message = fmt.Sprintf(k.message, "")
	}
	if e.Type == schemas.EventUnhealthy && e.Probe != "" {
		k.message = string(e.Probe) + " probe failed: " + k.message
	}
	return k, true
}

// eventsFollower records a node's lifecycle events as Events of their
// pods, from a time on, resuming after the last one it handled when its
// follow is started again.
type eventsFollower struct {
	pods     *nodePods
	recorder record.EventRecorder
	since    time.Time
	last     uint64 // the Seq of the last event handled; owned by follow's goroutine
}

// follow records events until ctx ends.
func (f *eventsFollower) follow(ctx context.Context) error {
	p := f.pods
	return p.jetlet.Events(ctx, client.EventsOptions{Node: p.node, Since: f.since, After: f.last, Follow: true}, func(e *client.Event) error {
		f.last = e.Seq
		k, ok := kubeEventOf(&e.LifecycleEvent)
		if !ok {
			return nil
		}
		pod, err := p.pods.Pods(e.Namespace).Get(e.Pod)
		if err != nil || string(pod.UID) != e.UID {
			return nil // not (or no longer) this Node's pod
		}
		f.recorder.Event(pod, k.typ, k.reason, k.message)
		return nil
	})
}
