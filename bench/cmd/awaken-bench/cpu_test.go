package main

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"
)

// spinForProfile burns CPU in a function of its own name, for the profile reader to find.
//
//go:noinline
func spinForProfile(d time.Duration) int {
	n := 0
	for start := time.Now(); time.Since(start) < d; {
		for i := range 10_000 {
			n += i * i
		}
	}
	return n
}

// TestCPUShares: the profile reader decodes what runtime/pprof writes — every sample with
// its CPU time and its frames' functions — so the shares of a phase's profile name the
// code that ran.
func TestCPUShares(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	spinForProfile(300 * time.Millisecond)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	prof, err := readProfile(in)
	if err != nil {
		t.Fatal(err)
	}
	var total, spin int64
	for _, s := range prof.samples {
		total += s.value
		for _, fn := range s.funcs {
			if fn == "github.com/awaken-dev/awaken/bench/cmd/awaken-bench.spinForProfile" || fn == "main.spinForProfile" {
				spin += s.value
				break
			}
		}
	}
	if total == 0 || spin < total/2 {
		t.Fatalf("profile: %d ns in all, %d ns in spinForProfile; want most of it there", total, spin)
	}
	shares, err := cpuShares(path)
	if err != nil {
		t.Fatal(err)
	}
	if shares["rest"] < 0.5 || shares["nats-server"] != 0 {
		t.Fatalf("shares %v: want the spin under rest, nothing under nats-server", shares)
	}
}
