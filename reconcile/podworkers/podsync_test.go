package podworkers

import (
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

func TestCompareStatus(t *testing.T) {
	last := &schemas.PodStatus{UID: "u", Revision: 3, IntentSeq: 10, Phase: schemas.PhaseRunning, ObservedAt: time.Unix(1, 0),
		Containers: []schemas.ContainerStatus{{Name: "app", State: "Running", Ready: true}}}
	with := func(edit func(*schemas.PodStatus)) *schemas.PodStatus {
		st := *last
		st.Containers = append([]schemas.ContainerStatus(nil), last.Containers...)
		edit(&st)
		return &st
	}
	for _, c := range []struct {
		name string
		last *schemas.PodStatus
		st   *schemas.PodStatus
		want statusChange
	}{
		{"first status", nil, last, statusVisible},
		{"observed later", last, with(func(s *schemas.PodStatus) { s.ObservedAt = time.Unix(2, 0) }), statusSame},
		{"a no-op intent", last, with(func(s *schemas.PodStatus) { s.Revision, s.IntentSeq = 4, 11 }), statusIntentOnly},
		{"a no-op intent without revision", last, with(func(s *schemas.PodStatus) { s.IntentSeq = 11 }), statusIntentOnly},
		{"a new intent and a change", last, with(func(s *schemas.PodStatus) { s.IntentSeq, s.Containers[0].Ready = 11, false }), statusVisible},
		{"a change", last, with(func(s *schemas.PodStatus) { s.Phase = schemas.PhaseFailed }), statusVisible},
	} {
		if got := compareStatus(c.last, c.st); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
