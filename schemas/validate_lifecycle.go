package schemas

import (
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

var stopSignalRE = regexp.MustCompile(stopSignalPattern)

// validateLifecycle checks the lifecycle of the container at p: its hooks
// and its stop signal.
func validateLifecycle(e *errs, p string, l *corev1.Lifecycle) {
	if l.PostStart != nil {
		validateLifecycleHandler(e, p+".lifecycle.postStart", l.PostStart)
	}
	if l.PreStop != nil {
		validateLifecycleHandler(e, p+".lifecycle.preStop", l.PreStop)
	}
	if l.StopSignal != nil && !stopSignalRE.MatchString(string(*l.StopSignal)) {
		e.invalid(p+".lifecycle.stopSignal", "must be a Linux signal name such as SIGTERM, SIGUSR1 or SIGRTMIN+1")
	}
}

func validateLifecycleHandler(e *errs, p string, h *corev1.LifecycleHandler) {
	n := validateExecAndHTTPGet(e, p, h.Exec, h.HTTPGet)
	if h.Sleep != nil {
		n++
		if h.Sleep.Seconds < 0 {
			e.invalid(p+".sleep.seconds", "must be >= 0")
		}
	}
	if h.TCPSocket != nil {
		n++
		e.unsupported(p+".tcpSocket", "tcpSocket is not a working lifecycle hook; use exec, httpGet or sleep")
	}
	if n != 1 {
		e.invalid(p, "must specify exactly one handler of exec, httpGet and sleep")
	}
}
