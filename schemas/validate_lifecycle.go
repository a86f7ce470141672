package schemas

import (
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

var stopSignalRE = regexp.MustCompile(stopSignalPattern)

func validateLifecycleHandler(e *errs, p string, h *corev1.LifecycleHandler) {
	n := 0
	if h.Exec != nil {
		n++
		validateExec(e, p+".exec", h.Exec)
	}
	if h.HTTPGet != nil {
		n++
		validateHTTPGet(e, p+".httpGet", h.HTTPGet)
	}
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
