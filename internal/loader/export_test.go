package loader

// The limits the router enforces, for limits_test.go (package loader_test:
// api imports backup, which reads .npy through this package, so only an
// external test may import api).
const (
	MaxBodyBytesForTest = maxBodyBytes
	MaxIDBytesForTest   = maxIDBytes
)
