// Package threadclock reads the CPU time of the calling OS thread, so a
// one-core measurement on a busy machine counts the time its thread ran,
// not the time it waited for a core (memory bandwidth taken by others
// still counts). Callers lock their goroutine to its thread first
// (runtime.LockOSThread).
//
// It is a leaf: it must never import another trawl package or keep state.
package threadclock
