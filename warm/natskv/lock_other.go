//go:build !unix

package natskv

// lockDir does nothing where flock is missing: two embedded servers on one
// store directory are not detected there.
func lockDir(string) (func(), error) { return func() {}, nil }
