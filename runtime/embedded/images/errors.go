package images

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

var (
	// ErrNotFound is wrapped by a pull whose registry has no such image or
	// tag (HTTP 404, MANIFEST_UNKNOWN, NAME_UNKNOWN), and by Remove and Hold
	// when the store holds no such image. (ReadFile's missing file wraps
	// fs.ErrNotExist.)
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized is wrapped by a pull the registry refused (HTTP 401 or
	// 403, UNAUTHORIZED, DENIED): credentials missing or wrong.
	ErrUnauthorized = errors.New("unauthorized")
)

// pullError is a failed pull of ref. Its text is redacted of the pull's
// credentials, and it unwraps only to its kind (ErrNotFound,
// ErrUnauthorized, a context error, or nothing), so no unredacted text is
// reachable from it.
type pullError struct {
	ref  string
	kind error
	msg  string
}

func (e *pullError) Error() string {
	if e.kind == ErrNotFound || e.kind == ErrUnauthorized {
		return fmt.Sprintf("pull %s: %v: %s", e.ref, e.kind, e.msg)
	}
	return fmt.Sprintf("pull %s: %s", e.ref, e.msg)
}

func (e *pullError) Unwrap() error { return e.kind }

// newPullError classifies err, the failure of pulling ref with auth: the
// registry's not-found and unauthorized answers become ErrNotFound and
// ErrUnauthorized; a context error stays what it is (errors.Is finds it).
func newPullError(ref string, err error, auth *Auth) error {
	var pe *pullError
	if errors.As(err, &pe) {
		return err
	}
	e := &pullError{ref: ref, msg: redact(err.Error(), auth)}
	var te *transport.Error
	switch {
	case errors.Is(err, context.Canceled):
		e.kind = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		e.kind = context.DeadlineExceeded
	case errors.Is(err, ErrNotFound):
		e.kind = ErrNotFound
	case errors.Is(err, ErrUnauthorized):
		e.kind = ErrUnauthorized
	case errors.As(err, &te):
		e.kind = classifyRegistryError(te)
	}
	return e
}

func classifyRegistryError(te *transport.Error) error {
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return ErrNotFound
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return ErrUnauthorized
		}
	}
	switch te.StatusCode {
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrUnauthorized
	}
	return nil
}

// redact replaces every secret of auth that appears in s: registries and
// libraries are not expected to echo credentials, but an error text goes to
// logs and events, so it is not left to them.
func redact(s string, auth *Auth) string {
	if auth == nil {
		return s
	}
	for _, secret := range []string{auth.Password, auth.Auth, auth.IdentityToken, auth.RegistryToken} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "<redacted>")
		}
	}
	return s
}
