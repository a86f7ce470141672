//go:build race

package jetlettest

const raceEnabled = true
