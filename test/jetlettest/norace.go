//go:build !race

package jetlettest

// raceFlags builds the jetlet binary with -race when the tests have it.
var raceFlags []string
