package client

import (
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines a hunk shows around a change, as
// diff -u does.
const diffContext = 3

// UnifiedDiff is the line diff of a and b in unified format (as diff -u and
// git print it), with from and to on its --- and +++ lines; "" when they are
// equal. It diffs by the longest common subsequence of lines: quadratic, and
// made for documents the size of a pod.
func UnifiedDiff(from, to, a, b string) string {
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	var sb strings.Builder
	for start := 0; start < len(ops); {
		// A hunk: from diffContext lines before a change to diffContext
		// lines after the last change that is near enough to join it.
		first := start
		for first < len(ops) && ops[first].kind == ' ' {
			first++
		}
		if first == len(ops) {
			break
		}
		lo := max(first-diffContext, start)
		hi := first
		for i := first; i < len(ops); i++ {
			if ops[i].kind != ' ' {
				hi = i + 1
			} else if i-hi >= 2*diffContext {
				break
			}
		}
		hi = min(hi+diffContext, len(ops))
		if sb.Len() == 0 {
			fmt.Fprintf(&sb, "--- %s\n+++ %s\n", from, to)
		}
		aStart, bStart := ops[lo].a, ops[lo].b
		var aLen, bLen int
		for _, op := range ops[lo:hi] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range ops[lo:hi] {
			fmt.Fprintf(&sb, "%c%s\n", op.kind, op.line)
		}
		start = hi
	}
	return sb.String()
}

// diffOp is one line of a diff: kept (' '), removed ('-') or added ('+'),
// with where it stands in a and in b (0-based: the next line of each).
type diffOp struct {
	kind byte
	line string
	a, b int
}

// diffLines is the edit script from x to y by their longest common
// subsequence.
func diffLines(x, y []string) []diffOp {
	// lcs[i][j] is the length of the LCS of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, diffOp{' ', x[i], i, j})
			i++
			j++
		case j == len(y) || (i < len(x) && lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', x[i], i, j})
			i++
		default:
			ops = append(ops, diffOp{'+', y[j], i, j})
			j++
		}
	}
	return ops
}

// hunkRange is a hunk header's start,length, 1-based; an empty range
// names the line before it, as diff -u does.
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
