package schemas

import (
	"strconv"
	"strings"
)

// ErrorKind classifies why an intent was refused. Each kind is itself an error,
// so errors.Is(err, ErrInvalid) works on anything DecodeIntent returns, and a
// *ValidationError's Kind can be switched on directly.
type ErrorKind string

const (
	// ErrMalformed: the body is not a usable JSON document (not JSON, not an
	// object, trailing data, over the size limit).
	ErrMalformed ErrorKind = "malformed"
	// ErrInvalid: the body is JSON but breaks a rule (wrong type, missing or
	// bad value, uid not matching the subject, ...).
	ErrInvalid ErrorKind = "invalid"
	// ErrUnsupported: the body is a valid pod but asks for something this node
	// cannot honour (a persistentVolumeClaim volume, a field it does not know,
	// a privileged container when not allowed, ...).
	ErrUnsupported ErrorKind = "unsupported"
)

func (k ErrorKind) Error() string { return string(k) }

// ValidationError is one problem with an intent, attributed to a field.
type ValidationError struct {
	Kind ErrorKind
	// Field is the JSON path of the offending field, rooted at the intent:
	// "pod.spec.containers[0].image", "pod.metadata.labels[app]". It is "" when
	// the body as a whole is at fault, and starts with "subject." when the
	// subject the intent arrived on is.
	Field string
	// Reason says what is wrong, in words fit for a SyncResult's error.
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return string(e.Kind) + ": " + e.Reason
	}
	return e.Field + ": " + string(e.Kind) + ": " + e.Reason
}

// Unwrap returns the error's kind, so errors.Is(err, ErrUnsupported) works.
func (e *ValidationError) Unwrap() error { return e.Kind }

// ValidationErrors is every problem found in one intent, in the order of the
// fields in the document. DecodeIntent returns one (never empty) when it fails,
// so errors.As(err, &ve) with ve a *ValidationError yields the first problem.
type ValidationErrors []*ValidationError

// maxReported bounds how many problems one error reports, so that a hostile
// body cannot make a huge result message.
const maxReported = 16

func (l ValidationErrors) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i == maxReported {
			b.WriteString("; and " + strconv.Itoa(len(l)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap exposes each problem to errors.Is and errors.As.
func (l ValidationErrors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Has reports whether some problem is of kind k.
func (l ValidationErrors) Has(k ErrorKind) bool {
	for _, e := range l {
		if e.Kind == k {
			return true
		}
	}
	return false
}

// errs collects the problems found while validating, in the order found.
type errs struct{ list ValidationErrors }

func (e *errs) add(kind ErrorKind, field, reason string) {
	e.list = append(e.list, &ValidationError{Kind: kind, Field: field, Reason: reason})
}

func (e *errs) invalid(field, reason string)     { e.add(ErrInvalid, field, reason) }
func (e *errs) unsupported(field, reason string) { e.add(ErrUnsupported, field, reason) }

func (e *errs) err() error {
	if len(e.list) == 0 {
		return nil
	}
	return e.list
}
