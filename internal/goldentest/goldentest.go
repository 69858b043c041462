// Package goldentest compares a test's output with a golden file, or rewrites the file when
// the test binary runs with -update. Only tests import it.
//
// One -update flag serves every golden file of a test binary (a flag may be declared only
// once per binary): review the diff of testdata/ before committing, since a golden file
// pins a wire or storage format.
package goldentest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output instead of comparing against them")

// Check fails t unless got equals the golden file at path (relative to the test's
// package directory); under -update it writes got there instead, creating the directory.
// Once Check returns, the file holds got.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (run with -update to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s changed; if the change is intended, rerun with -update and review the diff\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
