package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The soak's configuration is the example's with its relative module paths made absolute
// (the copy lives in a temporary directory) and the retention section added; an example
// with a retention section of its own is refused rather than given two.
func TestSoakConfig(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join(dir, "examples", "awaken.yaml")
	if err := os.MkdirAll(filepath.Dir(example), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(example, []byte("tools:\n  - id: wc\n    module: ../bin/wasm/wc.wasm\n  - id: abs\n    module: /opt/x.wasm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := soakConfig(example, t.TempDir(), "2m0s")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module: " + filepath.Join(dir, "bin/wasm/wc.wasm") + "\n", "module: /opt/x.wasm\n", "retention:\n  default: 2m0s\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("soak configuration lacks %q:\n%s", want, b)
		}
	}
	if err := os.WriteFile(example, []byte("retention:\n  default: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := soakConfig(example, t.TempDir(), "2m0s"); err == nil {
		t.Error("an example with a retention section was accepted")
	}
}

// A store plateaus when its size at the end is within 1.2× of the 50% mark, or grew by
// less than one block allocation's slack; the 50% mark is the first sample with half the
// calls done.
func TestSummarizePlateau(t *testing.T) {
	at := func(calls, grows, level, tiny int64) sample {
		return sample{Calls: calls, Stores: map[string]store{"grows": {Bytes: grows}, "level": {Bytes: level}, "tiny": {Bytes: tiny}}}
	}
	sum := &summary{Stores: map[string]storeSummary{}, Samples: []sample{
		at(100, 10<<20, 50<<20, 8192), at(500, 20<<20, 55<<20, 8192), at(1000, 30<<20, 56<<20, 16384),
	}}
	summarize(sum)
	for name, want := range map[string]bool{"grows": false, "level": true, "tiny": true} {
		if got := sum.Stores[name].Plateaued; got != want {
			t.Errorf("%s: plateaued %v, want %v (%+v)", name, got, want, sum.Stores[name])
		}
	}
	if got := sum.Stores["grows"].BytesMid; got != 20<<20 {
		t.Errorf("50%% mark of grows: %d bytes, want the sample at 500 calls (%d)", got, 20<<20)
	}
}
