// Package skipfile reads the lists of tests a CI stage may skip
// (test/critest/skips.txt, .ci/skips.allowed): one entry a line, what it
// names, then " # " and why. Blank lines and lines that start with "#" are
// comments; an entry without a reason is refused.
package skipfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Entry is one line of a skip list: what it names (a pattern its stage
// reads) and why it is skipped.
type Entry struct {
	Line    int
	Pattern string
	Reason  string
}

func (e Entry) String() string { return fmt.Sprintf("line %d %q", e.Line, e.Pattern) }

// Parse reads "PATTERN # REASON" lines.
func Parse(r io.Reader) ([]Entry, error) {
	var entries []Entry
	var errs []error
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pattern, reason, _ := strings.Cut(line, " # ")
		e := Entry{Line: n, Pattern: strings.TrimSpace(pattern), Reason: strings.TrimSpace(reason)}
		if e.Reason == "" {
			errs = append(errs, fmt.Errorf("%s has no reason (PATTERN # REASON)", e))
			continue
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return entries, errors.Join(errs...)
}

// Read parses the file at path; its errors name the file.
func Read(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}
