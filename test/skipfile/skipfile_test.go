package skipfile

import (
	"strings"
	"testing"
)

func TestParseReadsEntriesAndRefusesOneWithoutAReason(t *testing.T) {
	entries, err := Parse(strings.NewReader("# a comment\n\n  name one  # why one \nname # two # the rest is the reason\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Line: 3, Pattern: "name one", Reason: "why one"}, {Line: 4, Pattern: "name", Reason: "two # the rest is the reason"}}
	if len(entries) != len(want) || entries[0] != want[0] || entries[1] != want[1] {
		t.Errorf("entries %+v, want %+v", entries, want)
	}
	for _, bad := range []string{"name\n", "name #\n", "name #no space\n", "name # \n"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "has no reason") {
			t.Errorf("%q: %v, want refused for want of a reason", bad, err)
		}
	}
}
