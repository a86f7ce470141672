package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/jetlet/jetlet/runtime/probe/outcome"
)

// HTTPGet sends a GET to u with header: a 2xx or 3xx status is OK (a redirect
// to another host is not followed and counts as success with a warning, as in
// kubelet), anything else or no answer within timeout is a failure. The
// User-Agent is "jetlet-probe/<version>" and Accept "*/*" unless header sets
// them; a Host header sets the request's host.
func (r *Runner) HTTPGet(ctx context.Context, u *url.URL, header http.Header, timeout time.Duration) (outcome.Outcome, error) {
	reqCtx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, u.String(), nil)
	if err != nil {
		return outcome.Outcome{}, fmt.Errorf("httpGet %s: %w", u, err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", r.userAgent)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	}
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := r.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return outcome.Outcome{}, fmt.Errorf("httpGet %s: %w", u, ctx.Err())
		}
		return outcome.Outcome{Message: err.Error()}, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
	if err != nil {
		return outcome.Outcome{Message: fmt.Sprintf("reading the response of %s: %v", u, err)}, nil
	}
	switch code := resp.StatusCode; {
	case code >= http.StatusMultipleChoices && code < http.StatusBadRequest:
		return outcome.Outcome{OK: true, Message: fmt.Sprintf("probe terminated redirects, response body: %s", body)}, nil
	case code >= http.StatusOK && code < http.StatusMultipleChoices:
		return outcome.Outcome{OK: true, Message: string(body)}, nil
	default:
		return outcome.Outcome{Message: fmt.Sprintf("HTTP probe failed with statuscode: %d", code)}, nil
	}
}
