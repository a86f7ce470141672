package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultMaxIntentBytes is the largest intent body DecodeIntent accepts when
// IntentTarget.MaxBodyBytes is zero.
const DefaultMaxIntentBytes = 1 << 20

// DefaultGracePeriodSeconds is the grace period of a pod that names none.
const DefaultGracePeriodSeconds int64 = 30

// IntentTarget is what the subject says an intent is for, and the node's
// policy for it.
type IntentTarget struct {
	// Node is the <node> token of the subject. Required: a DNS-1123 label.
	Node string
	// UID is the <uid> token of the subject. Required: the body's
	// pod.metadata.uid must equal it.
	UID string
	// MaxBodyBytes bounds the body; 0 means DefaultMaxIntentBytes.
	MaxBodyBytes int
	// AllowPrivileged accepts privileged containers (jetlet run --allow-privileged).
	AllowPrivileged bool
	// NoMemoryEmptyDir rejects emptyDir volumes of medium Memory: the node
	// cannot mount the tmpfs they need (jetlet does not run as root).
	NoMemoryEmptyDir bool
}

// wireIntent is the envelope as it travels: pointers where "absent" and
// "zero" differ, the pod kept raw until the op is known.
type wireIntent struct {
	APIVersion         string          `json:"apiVersion"`
	Kind               string          `json:"kind"`
	Op                 Op              `json:"op,omitempty"`
	Revision           *int64          `json:"revision,omitempty"`
	GracePeriodSeconds *int64          `json:"gracePeriodSeconds,omitempty"`
	Pod                json.RawMessage `json:"pod"`
}

// wirePod is a core/v1 Pod as an apply intent carries it: status is accepted
// whatever it holds and dropped.
type wirePod struct {
	APIVersion string            `json:"apiVersion,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       *corev1.PodSpec   `json:"spec,omitempty"`
	Status     json.RawMessage   `json:"status,omitempty"`
}

// wireDeletePod is the pod of a delete intent: only metadata is checked.
type wireDeletePod struct {
	APIVersion string            `json:"apiVersion,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec,omitempty"`
	Status     json.RawMessage   `json:"status,omitempty"`
}

// DecodeIntent decodes, validates and defaults the body of an intent that
// arrived on the subject described by want. On success the intent's Op is set
// (apply when absent) and, for an apply, its pod carries the API server's
// defaults and spec.nodeName = want.Node; for a delete only pod.metadata is
// validated and the spec is kept as far as it decodes.
//
// On failure the error is a ValidationErrors (never empty): errors.Is tells
// the kind (ErrMalformed, ErrInvalid, ErrUnsupported), errors.As with a
// *ValidationError gives the first problem's field. Malformed problems come
// alone; otherwise every problem found is listed, in a stable order.
func DecodeIntent(body []byte, want IntentTarget) (*PodIntent, error) {
	e := &errs{}
	limit := want.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxIntentBytes
	}
	if !ValidNodeName(want.Node) {
		e.invalid("subject.node", "not a valid node name (a DNS-1123 label)")
	}
	if !ValidUID(want.UID) {
		e.invalid("subject.uid", "not a valid pod UID (1 to 128 of A-Z a-z 0-9 _ -)")
	}
	if len(e.list) > 0 {
		return nil, e.err()
	}
	if len(body) > limit {
		e.add(ErrMalformed, "", "body is "+strconv.Itoa(len(body))+" bytes, over the limit of "+strconv.Itoa(limit))
		return nil, e.err()
	}
	tree, err := parseTree(body)
	if err != nil {
		e.add(ErrMalformed, "", "not JSON: "+leafReason(err))
		return nil, e.err()
	}
	top, ok := tree.(map[string]any)
	if !ok {
		e.add(ErrMalformed, "", "not a JSON object")
		return nil, e.err()
	}

	// The envelope.
	w, ok := decodeChecked[wireIntent](e, "", top, body)
	if !ok {
		return nil, e.err()
	}
	if w.APIVersion != APIVersion {
		e.invalid("apiVersion", "must be "+strconv.Quote(APIVersion))
	}
	if w.Kind != KindPodIntent {
		e.invalid("kind", "must be "+strconv.Quote(KindPodIntent))
	}
	op := w.Op
	switch op {
	case "":
		op = OpApply
	case OpApply, OpDelete:
	default:
		e.invalid("op", `must be "apply" or "delete"`)
	}
	if w.Revision != nil && *w.Revision < 1 {
		e.invalid("revision", "must be a positive integer")
	}
	if w.GracePeriodSeconds != nil && *w.GracePeriodSeconds < 0 {
		e.invalid("gracePeriodSeconds", "must be >= 0")
	}
	podTree, ok := top["pod"].(map[string]any)
	if !ok {
		if top["pod"] == nil {
			e.invalid("pod", "required")
		} else {
			e.invalid("pod", "must be an object")
		}
	}
	if len(e.list) > 0 {
		return nil, e.err()
	}

	intent := &PodIntent{
		APIVersion:         w.APIVersion,
		Kind:               w.Kind,
		Op:                 op,
		GracePeriodSeconds: w.GracePeriodSeconds,
	}
	if w.Revision != nil {
		intent.Revision = *w.Revision
	}

	// The pod.
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	var podAPIVersion, podKind string
	if op == OpDelete {
		p, ok := decodeChecked[wireDeletePod](e, "pod", podTree, w.Pod)
		if !ok {
			return nil, e.err()
		}
		podAPIVersion, podKind = p.APIVersion, p.Kind
		pod.ObjectMeta = p.Metadata
		if len(p.Spec) > 0 {
			// Best effort: a delete needs no spec, but its grace period helps.
			if json.Unmarshal(p.Spec, &pod.Spec) != nil {
				pod.Spec = corev1.PodSpec{}
			}
		}
	} else {
		p, ok := decodeChecked[wirePod](e, "pod", podTree, w.Pod)
		if !ok {
			return nil, e.err()
		}
		podAPIVersion, podKind = p.APIVersion, p.Kind
		pod.ObjectMeta = p.Metadata
		if p.Spec == nil {
			e.invalid("pod.spec", "required")
		} else {
			pod.Spec = *p.Spec
		}
	}
	if podAPIVersion != "" && podAPIVersion != "v1" {
		e.invalid("pod.apiVersion", `must be "v1" when set`)
	}
	if podKind != "" && podKind != "Pod" {
		e.invalid("pod.kind", `must be "Pod" when set`)
	}
	validateMetadata(e, &pod.ObjectMeta, want.UID)
	if op == OpApply && len(e.list) == 0 {
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != want.Node {
			e.invalid("pod.spec.nodeName", "is "+strconv.Quote(pod.Spec.NodeName)+" but the intent is for node "+strconv.Quote(want.Node))
		}
		SetPodDefaults(pod)
		pod.Spec.NodeName = want.Node
		validatePodSpec(e, &pod.Spec, want)
	}
	if len(e.list) > 0 {
		return nil, e.err()
	}
	intent.Pod = pod
	return intent, nil
}

// decodeChecked reports under path what checkTree finds wrong in tree, the
// parsed form of raw, for a T; when it finds nothing, it decodes raw into a T.
func decodeChecked[T any](e *errs, path string, tree any, raw []byte) (v T, ok bool) {
	checkTree(e, path, tree, reflect.TypeFor[T]())
	if len(e.list) > 0 {
		return v, false
	}
	if err := strictUnmarshal(raw, &v); err != nil {
		e.invalid(path, leafReason(err))
		return v, false
	}
	return v, true
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Envelope is what can be read of an intent body without validating it as a
// whole, to attribute a body that DecodeIntent refused. Each field is read on
// its own and left zero when absent or not valid by itself, so one bad field
// does not hide the others.
type Envelope struct {
	Op        Op // apply when absent
	Revision  int64
	Namespace string
	Name      string
	UID       string
}

// PeekEnvelope reads the envelope of an intent body, best effort.
func PeekEnvelope(body []byte) Envelope {
	env := Envelope{Op: OpApply}
	top := peekField[map[string]json.RawMessage](body)
	if op := peekField[Op](top["op"]); op == OpDelete {
		env.Op = op
	}
	if rev := peekField[int64](top["revision"]); rev > 0 {
		env.Revision = rev
	}
	pod := peekField[map[string]json.RawMessage](top["pod"])
	meta := peekField[map[string]json.RawMessage](pod["metadata"])
	if ns := peekField[string](meta["namespace"]); isDNSLabel(ns) {
		env.Namespace = ns
	}
	if name := peekField[string](meta["name"]); isDNSSubdomain(name) {
		env.Name = name
	}
	if uid := peekField[string](meta["uid"]); ValidUID(uid) {
		env.UID = uid
	}
	return env
}

// peekField decodes raw as a T, or returns the zero T.
func peekField[T any](raw []byte) T {
	var v T
	if json.Unmarshal(raw, &v) != nil {
		var zero T
		return zero
	}
	return v
}

// GracePeriod is the grace period, in seconds, of deleting the intent's pod:
// gracePeriodSeconds, else the pod's terminationGracePeriodSeconds, else 30
// (CONTRACT.md section 3). Negative values are ignored.
func (i *PodIntent) GracePeriod() int64 {
	if i.GracePeriodSeconds != nil && *i.GracePeriodSeconds >= 0 {
		return *i.GracePeriodSeconds
	}
	if i.Pod != nil {
		if g := i.Pod.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
			return *g
		}
	}
	return DefaultGracePeriodSeconds
}
