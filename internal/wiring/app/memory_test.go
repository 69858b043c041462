package app

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestLimitDevMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "")
	if got := LimitDevMemory(); got != DevMemoryLimit || debug.SetMemoryLimit(-1) != DevMemoryLimit {
		t.Fatalf("without GOMEMLIMIT: LimitDevMemory = %d, runtime limit %d; want %d", got, debug.SetMemoryLimit(-1), DevMemoryLimit)
	}

	// GOMEMLIMIT is read by the runtime at start; a set variable means the operator chose,
	// and the runtime's limit is left as it is.
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "off")
	if got := LimitDevMemory(); got != math.MaxInt64 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT=off: LimitDevMemory = %d, runtime limit %d; want no limit", got, debug.SetMemoryLimit(-1))
	}
}
