//go:build !race

package racerange

// Read does nothing outside race builds.
func Read[T any](s []T) {}
