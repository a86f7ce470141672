package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
	// NoMemoryEmptyDir rejects emptyDir volumes of medium Memory: the node
	// cannot mount the tmpfs they need (jetlet does not run as root).
	NoMemoryEmptyDir bool
	// NoUserNamespaces rejects hostUsers false: the node's runtime does not
	// say it supports user namespaces (its Status's runtime handler
	// features), and one that ignores them would run the pod as the host's
	// root (containerd 1.6).
	NoUserNamespaces bool
}

// wireEnvelope is the envelope as it travels: pointers where "absent" and
// "zero" differ.
type wireEnvelope struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Op                 Op     `json:"op,omitempty"`
	Revision           *int64 `json:"revision,omitempty"`
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// wireIntent is an intent with its pod kept raw until the op is known.
type wireIntent struct {
	wireEnvelope
	Pod json.RawMessage `json:"pod"`
}

// wireApplyIntent is an apply intent decoded in one pass (decodeApply).
type wireApplyIntent struct {
	wireEnvelope
	Pod *wirePod `json:"pod"`
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
	if intent := decodeApply(body, want); intent != nil {
		return intent, nil
	}
	return decodeChecking(body, want)
}

// decodeApply is DecodeIntent's one pass for the common case, a valid apply
// intent. It returns nil whenever anything might be wrong, and DecodeIntent
// then runs decodeChecking, which finds and words every problem: so it must
// accept nothing decodeChecking refuses (FuzzDecodeApply checks that).
// json v2 refuses unknown and duplicate names, names that match only when
// case is ignored, invalid UTF-8 and values of the wrong JSON type.
func decodeApply(body []byte, want IntentTarget) *PodIntent {
	opts := applyOptions
	if hasNull(body) {
		opts = applyNullOptions
	}
	var w wireApplyIntent
	if jsonv2.Unmarshal(body, &w, opts) != nil || w.Pod == nil || w.Pod.Spec == nil || w.Op == OpDelete {
		return nil
	}
	e := &errs{}
	intent := w.check(e)
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: w.Pod.Metadata, Spec: *w.Pod.Spec}
	checkPod(e, intent.Op, pod, w.Pod.APIVersion, w.Pod.Kind, want)
	if len(e.list) > 0 {
		return nil
	}
	intent.Pod = pod
	return intent
}

var (
	applyOptions = jsonv2.RejectUnknownMembers(true)
	// json v2 makes a null the zero value wherever it is. checkTree refuses
	// it where Go cannot hold "absent", and so does refuseNull; it costs a
	// call per value, so only bodies that may hold a null pay it.
	applyNullOptions = jsonv2.JoinOptions(applyOptions, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(refuseNull)))
	errNull          = errors.New("null where Go cannot hold absent")
)

// refuseNull fails on a null that v, a pointer to the value being decoded,
// cannot hold as checkTree sees it, and leaves everything else to json v2.
func refuseNull(dec *jsontext.Decoder, v any) error {
	if dec.PeekKind() != 'n' {
		return errors.ErrUnsupported
	}
	switch t := reflect.TypeOf(v).Elem(); t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
	default:
		if t != rawMessageType && !infoOf(t).leaf {
			return errNull
		}
	}
	return errors.ErrUnsupported
}

// hasNull reports whether body may hold a JSON null: "null" after a '[', ':'
// or ',' and before a ',', ']' or '}', blanks aside. Inside a string that
// is a false alarm, which only costs the slower options.
func hasNull(body []byte) bool {
	for rest, at := body, 0; ; {
		i := bytes.Index(rest, []byte("null"))
		if i < 0 {
			return false
		}
		at += i
		before := bytes.TrimRight(body[:at], " \t\r\n")
		after := bytes.TrimLeft(body[at+4:], " \t\r\n")
		if (len(before) == 0 || bytes.IndexByte([]byte("[:,"), before[len(before)-1]) >= 0) &&
			(len(after) == 0 || bytes.IndexByte([]byte(",]}"), after[0]) >= 0) {
			return true
		}
		at += 4
		rest = body[at:]
	}
}

// decodeChecking decodes body in three passes (a tree, checkTree against the
// Go types, encoding/json), to report every problem with its path.
func decodeChecking(body []byte, want IntentTarget) (*PodIntent, error) {
	e := &errs{}
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
	intent := w.check(e)
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

	// The pod.
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	var podAPIVersion, podKind string
	if intent.Op == OpDelete {
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
	checkPod(e, intent.Op, pod, podAPIVersion, podKind, want)
	if len(e.list) > 0 {
		return nil, e.err()
	}
	intent.Pod = pod
	return intent, nil
}

// check reports what is wrong with the envelope and returns the intent it
// describes, without its pod; the op is apply when absent.
func (w *wireEnvelope) check(e *errs) *PodIntent {
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
	intent := &PodIntent{
		APIVersion:         w.APIVersion,
		Kind:               w.Kind,
		Op:                 op,
		GracePeriodSeconds: w.GracePeriodSeconds,
	}
	if w.Revision != nil {
		intent.Revision = *w.Revision
	}
	return intent
}

// checkPod validates the decoded pod of an intent of the given op, whose
// body named the pod's apiVersion and kind as given (or not at all), and
// for an apply sets its defaults and node.
func checkPod(e *errs, op Op, pod *corev1.Pod, apiVersion, kind string, want IntentTarget) {
	if apiVersion != "" && apiVersion != "v1" {
		e.invalid("pod.apiVersion", `must be "v1" when set`)
	}
	if kind != "" && kind != "Pod" {
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
// (docs/contract.md section 3). Negative values are ignored.
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
