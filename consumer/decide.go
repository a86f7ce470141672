package consumer

import (
	"fmt"

	"github.com/jetlet/jetlet/schemas"
)

// candidate is an intent waiting for its pod's worker, decoded or not.
type candidate struct {
	seq    uint64
	intent *schemas.PodIntent // nil when decoding failed
	err    error              // why decoding failed
}

// verdict settles one candidate that is not applied.
type verdict struct {
	seq     uint64
	outcome schemas.Outcome
	reason  string
}

// applied is what a pod worker has applied so far.
type applied struct {
	seq      uint64 // stream sequence of the intent applied last
	revision int64  // highest revision applied; revision 0 (none given) is never stale
}

// decide picks, from the intents waiting for one pod (in stream order), the
// one to apply: the newest that is valid, newer than the one applied last and
// not stale. Every other one gets its answer: Rejected when invalid,
// Superseded when a newer one is or was applied instead, Stale when its
// revision is below the highest applied. Verdicts come in stream order, so
// results are stored in intent order.
func decide(batch []candidate, done applied) (verdicts []verdict, apply int) {
	apply = -1
	for i := len(batch) - 1; i >= 0; i-- {
		c := batch[i]
		if c.intent != nil && c.seq >= done.seq && !isStale(c.intent.Revision, done.revision) {
			apply = i
			break
		}
	}
	for i, c := range batch {
		switch {
		case i == apply:
		case c.intent == nil:
			verdicts = append(verdicts, verdict{c.seq, schemas.OutcomeRejected, c.err.Error()})
		case c.seq < done.seq:
			verdicts = append(verdicts, verdict{c.seq, schemas.OutcomeSuperseded,
				fmt.Sprintf("intent %d for the same pod was applied instead", done.seq)})
		case isStale(c.intent.Revision, done.revision):
			verdicts = append(verdicts, verdict{c.seq, schemas.OutcomeStale,
				fmt.Sprintf("revision %d is below revision %d, already applied", c.intent.Revision, done.revision)})
		default:
			verdicts = append(verdicts, verdict{c.seq, schemas.OutcomeSuperseded,
				fmt.Sprintf("intent %d for the same pod was applied instead", batch[apply].seq)})
		}
	}
	return verdicts, apply
}

func isStale(revision, applied int64) bool { return revision > 0 && revision < applied }
