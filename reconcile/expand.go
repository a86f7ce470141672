package reconcile

import "strings"

// expand replaces $(VAR) in s by mapping(VAR), with kubelet's rules
// (third_party/forked/golang/expansion): "$$" is an escaped "$", a reference
// to an unknown variable is left as written, and an unterminated "$(" is
// kept as is.
func expand(s string, mapping func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	checkpoint := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			continue
		}
		b.WriteString(s[checkpoint:i])
		read, isVar, advance := readVariableName(s[i+1:])
		if isVar {
			if v, ok := mapping(read); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + read + ")")
			}
		} else {
			b.WriteString(read)
		}
		i += advance
		checkpoint = i + 1
	}
	return b.String() + s[checkpoint:]
}

// readVariableName reads what follows a "$": the variable's name and true for
// "(NAME)", else the text to copy; advance is how many bytes were consumed.
func readVariableName(s string) (string, bool, int) {
	switch s[0] {
	case '$':
		return "$", false, 1
	case '(':
		for i := 1; i < len(s); i++ {
			if s[i] == ')' {
				return s[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	default:
		return "$" + s[:1], false, 1
	}
}
