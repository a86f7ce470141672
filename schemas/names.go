package schemas

import (
	"strconv"
	"strings"
)

// DefaultSubjectPrefix is the first token of every jetlet subject.
const DefaultSubjectPrefix = "jetlet"

// Stream and bucket names (docs/contract.md section 2).
const (
	StreamIntents = "JETLET_INTENTS"
	StreamResults = "JETLET_RESULTS"
	StreamEvents  = "JETLET_EVENTS"
	StreamDead    = "JETLET_DEAD"
	BucketStatus  = "jetlet_status"
	BucketNodes   = "jetlet_nodes"
	// BucketConfigMaps holds ConfigMaps, key <namespace>.<name>, and
	// BucketSecrets Secrets sealed for one node, key
	// <node>.<namespace>.<name> (docs/contract.md section 11).
	BucketConfigMaps = "jetlet_configmaps"
	BucketSecrets    = "jetlet_secrets"
	// ObjectStoreImages holds images pushed over the bus (docs/contract.md
	// section 13; the object names: docs/wire-protocol.md section 13).
	ObjectStoreImages = "jetlet_images"
)

// Headers jetlet reads or writes besides the NATS ones.
const (
	HeaderIntentSeq = "Jetlet-Intent-Seq"
	HeaderError     = "Jetlet-Error"
)

// The patterns of node names and pod UIDs, for the JSON Schemas; match.go
// checks them by hand.
const (
	nodeNamePattern = `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`
	uidPattern      = `^[A-Za-z0-9_-]{1,128}$`
)

// ValidNodeName reports whether s is a DNS-1123 label usable as a node name.
func ValidNodeName(s string) bool { return len(s) <= 63 && matchDNSLabel(s) }

// ValidUID reports whether s is a pod UID usable as a subject token.
func ValidUID(s string) bool { return matchUID(s) }

// ValidSubjectPrefix reports whether s is one subject token, usable as the
// first token of every jetlet subject.
func ValidSubjectPrefix(s string) bool { return s != "" && !strings.ContainsAny(s, ".*> \t") }

// Subjects builds and parses the subjects of one prefix.
type Subjects struct{ Prefix string }

// IntentFilter is the subject filter of the intents stream.
func (s Subjects) IntentFilter() string { return s.Prefix + ".intent.*.*" }

// ResultFilter is the subject filter of the results stream.
func (s Subjects) ResultFilter() string { return s.Prefix + ".result.*.*" }

// EventFilter is the subject filter of the events stream.
func (s Subjects) EventFilter() string { return s.Prefix + ".event.*.*.*" }

// DeadFilter is the subject filter of the dead-letter stream.
func (s Subjects) DeadFilter() string { return s.Prefix + ".dead.*" }

// Intent is the subject of the intents for one pod.
func (s Subjects) Intent(node, uid string) string { return s.Prefix + ".intent." + node + "." + uid }

// NodeIntents is the filter of every intent for one node. It is `.>` rather than
// `.*` so that malformed subjects with extra tokens still reach the node and can be
// dead-lettered instead of sitting unanswered.
func (s Subjects) NodeIntents(node string) string { return s.Prefix + ".intent." + node + ".>" }

// Result is the subject of the results for one pod.
func (s Subjects) Result(node, uid string) string { return s.Prefix + ".result." + node + "." + uid }

// Event is the subject of one event of one pod.
func (s Subjects) Event(node, uid string, t EventType) string {
	return s.Prefix + ".event." + node + "." + uid + "." + string(t)
}

// PodEvents is the filter of every event of one pod.
func (s Subjects) PodEvents(node, uid string) string {
	return s.Prefix + ".event." + node + "." + uid + ".*"
}

// Dead is the dead-letter subject of one node.
func (s Subjects) Dead(node string) string { return s.Prefix + ".dead." + node }

// StatusKey is the jetlet_status key of one pod.
func StatusKey(node, uid string) string { return node + "." + uid }

// ResultMsgID is the Nats-Msg-Id of the result answering intent seq on node.
func ResultMsgID(node string, intentSeq uint64) string {
	return node + "." + strconv.FormatUint(intentSeq, 10)
}

// IntentUID returns the uid token of an intent subject for node, or "" with ok
// false when the subject does not have exactly the form prefix.intent.node.uid
// with a valid uid.
func (s Subjects) IntentUID(subject, node string) (uid string, ok bool) {
	rest, found := strings.CutPrefix(subject, s.Prefix+".intent."+node+".")
	if !found || !ValidUID(rest) {
		return "", false
	}
	return rest, true
}
