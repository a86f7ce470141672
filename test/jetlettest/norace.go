//go:build !race

package jetlettest

const raceEnabled = false
