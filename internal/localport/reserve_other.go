//go:build !unix

package localport

// reserve reserves nothing where flock is missing: Listen binds as it did
// before reservations, and a restart relies on Relisten's wait.
func reserve(string, int) (bool, error) { return true, nil }
