//go:build !unix

package devstack

// lockDataDir does not lock on this platform (no flock): one `awaken dev` per data
// directory is then the user's to keep.
func lockDataDir(string) (func(), error) { return func() {}, nil }
