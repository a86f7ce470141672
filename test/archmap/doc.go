// Package archmap keeps docs/architecture.md true: its test compares the
// package table's "may import" column with what `go list` says each package
// imports, and fails on a package the map leaves out or names wrongly.
package archmap
