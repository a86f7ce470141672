package consumer

import (
	"errors"
	"reflect"
	"testing"

	"github.com/jetlet/jetlet/schemas"
)

func TestDecide(t *testing.T) {
	valid := func(seq uint64, rev int64) candidate {
		return candidate{seq: seq, intent: &schemas.PodIntent{Revision: rev}}
	}
	invalid := func(seq uint64) candidate { return candidate{seq: seq, err: errors.New("bad")} }
	type v struct {
		seq     uint64
		outcome schemas.Outcome
	}
	tests := []struct {
		name    string
		batch   []candidate
		applied applied
		apply   uint64 // seq applied, 0 for none
		want    []v
	}{
		{"one valid", []candidate{valid(1, 0)}, applied{}, 1, nil},
		{"newest wins", []candidate{valid(1, 1), valid(2, 2), valid(3, 3)}, applied{}, 3,
			[]v{{1, schemas.OutcomeSuperseded}, {2, schemas.OutcomeSuperseded}}},
		{"invalid newest leaves the newest valid", []candidate{valid(1, 1), invalid(2)}, applied{}, 1,
			[]v{{2, schemas.OutcomeRejected}}},
		{"invalid older is rejected, not superseded", []candidate{invalid(1), valid(2, 0)}, applied{}, 2,
			[]v{{1, schemas.OutcomeRejected}}},
		{"stale alone", []candidate{valid(5, 3)}, applied{revision: 4}, 0, []v{{5, schemas.OutcomeStale}}},
		{"equal revision applies again", []candidate{valid(5, 4)}, applied{revision: 4}, 5, nil},
		{"no revision is never stale", []candidate{valid(5, 0)}, applied{revision: 9}, 5, nil},
		{"stale newest, older applied", []candidate{valid(1, 10), valid(2, 3)}, applied{revision: 5}, 1,
			[]v{{2, schemas.OutcomeStale}}},
		{"older than the one applied is superseded", []candidate{valid(3, 0), valid(7, 0)}, applied{seq: 5}, 7,
			[]v{{3, schemas.OutcomeSuperseded}}},
		{"the one applied again (redelivered after recovery)", []candidate{valid(5, 2)}, applied{seq: 5, revision: 2}, 5, nil},
		{"all invalid", []candidate{invalid(1), invalid(2)}, applied{}, 0,
			[]v{{1, schemas.OutcomeRejected}, {2, schemas.OutcomeRejected}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verdicts, apply := decide(tt.batch, tt.applied)
			var gotApply uint64
			if apply >= 0 {
				gotApply = tt.batch[apply].seq
			}
			if gotApply != tt.apply {
				t.Errorf("applied seq %d, want %d", gotApply, tt.apply)
			}
			var got []v
			for _, vd := range verdicts {
				got = append(got, v{vd.seq, vd.outcome})
				if vd.reason == "" {
					t.Errorf("verdict for %d has no reason", vd.seq)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("verdicts %v, want %v", got, tt.want)
			}
		})
	}
}
