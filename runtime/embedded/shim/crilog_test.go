package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var criLine = regexp.MustCompile(`^(\S+) (stdout|stderr) (F|P) (.*)$`)

type logEntry struct{ stream, tag, content string }

func parseCRILog(t *testing.T, data string) []logEntry {
	t.Helper()
	var out []logEntry
	for _, l := range strings.Split(strings.TrimSuffix(data, "\n"), "\n") {
		if l == "" {
			continue
		}
		m := criLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a CRI log line: %q", l)
		}
		if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
			t.Fatalf("bad timestamp in %q: %v", l, err)
		}
		out = append(out, logEntry{m[2], m[3], m[4]})
	}
	return out
}

func TestStreamLines(t *testing.T) {
	long := strings.Repeat("x", logLineMax+10)
	tests := []struct {
		name  string
		input string
		want  []logEntry
	}{
		{"full lines", "a\nb\r\n", []logEntry{{"stdout", "F", "a"}, {"stdout", "F", "b"}}},
		{"empty line", "\n", []logEntry{{"stdout", "F", ""}}},
		{"last line without newline", "a\nend", []logEntry{{"stdout", "F", "a"}, {"stdout", "P", "end"}}},
		{"long line split", long + "\n", []logEntry{{"stdout", "P", long[:logLineMax]}, {"stdout", "F", long[logLineMax:]}}},
	}
	for _, tt := range tests {
		// However the reads cut the output, the entries are the same.
		for _, size := range []int{1, 7, len(tt.input)} {
			t.Run(fmt.Sprintf("%s/reads of %d", tt.name, size), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "sub", "c.log")
				l, err := openCRILog(path)
				if err != nil {
					t.Fatal(err)
				}
				s := streamLines{stream: "stdout"}
				for in := tt.input; len(in) > 0; {
					n := min(size, len(in))
					s.add(l, []byte(in[:n]), time.Now())
					in = in[n:]
				}
				s.end(l, time.Now())
				l.close()
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				got := parseCRILog(t, string(data))
				if len(got) != len(tt.want) {
					t.Fatalf("got %d entries %v, want %v", len(got), got, tt.want)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Fatalf("entry %d = %+v, want %+v", i, got[i], tt.want[i])
					}
				}
			})
		}
	}
}
