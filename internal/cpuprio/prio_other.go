//go:build !linux

package cpuprio

// lowerThread leaves the thread as it is: only Linux gives a thread a
// priority of its own.
func lowerThread(int) error { return nil }

func threadNice() (int, error) { return 0, nil }
