// Package chaos_test runs jetlet nodes on a three-server JetStream cluster
// and breaks the cluster under load: a killed stream leader, a rolling
// restart, a partitioned server, a frozen one. Each run checks that every intent got
// exactly one result, no event was stored twice, every pod converged and no
// jetlet exited, and logs the longest pause in results the fault caused.
//
// They take minutes, so they run only when JETLET_CHAOS_RUNS says how many
// times to repeat each fault (on the same cluster): CI's chaos stage runs
// each once.
package chaos_test
