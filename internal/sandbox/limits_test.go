package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestOutputBuffer(t *testing.T) {
	tests := []struct {
		name           string
		limit          int
		writes         []int
		wantAccepted   []bool
		wantLen        int
		wantOverflowed bool
	}{
		{name: "under the limit", limit: 10, writes: []int{3, 3}, wantAccepted: []bool{true, true}, wantLen: 6},
		{name: "exactly the limit", limit: 10, writes: []int{4, 6}, wantAccepted: []bool{true, true}, wantLen: 10},
		{name: "one byte over", limit: 10, writes: []int{4, 7}, wantAccepted: []bool{true, false}, wantLen: 4, wantOverflowed: true},
		{name: "nothing after overflow", limit: 10, writes: []int{11, 1}, wantAccepted: []bool{false, false}, wantLen: 0, wantOverflowed: true},
		{name: "zero limit accepts empty writes only", limit: 0, writes: []int{0, 1}, wantAccepted: []bool{true, false}, wantOverflowed: true},
		{name: "many small writes", limit: 4096, writes: []int{1000, 1000, 1000, 1000, 96}, wantAccepted: []bool{true, true, true, true, true}, wantLen: 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			overflows := 0
			w := &outputBuffer{limit: tt.limit, onOverflow: func() { overflows++ }}
			for i, n := range tt.writes {
				got, err := w.Write(make([]byte, n))
				if accepted := err == nil; accepted != tt.wantAccepted[i] {
					t.Fatalf("write %d of %d bytes: err %v, want accepted %v", i, n, err, tt.wantAccepted[i])
				}
				if err == nil && got != n {
					t.Fatalf("write %d: wrote %d of %d", i, got, n)
				}
				if err != nil && (got != 0 || !errors.Is(err, errOutputLimit)) {
					t.Fatalf("write %d: rejected with n=%d err=%v", i, got, err)
				}
			}
			data, overflowed, retained, _ := w.snapshot()
			if len(data) != tt.wantLen || overflowed != tt.wantOverflowed {
				t.Fatalf("len %d overflowed %v, want %d %v", len(data), overflowed, tt.wantLen, tt.wantOverflowed)
			}
			if retained > tt.limit {
				t.Fatalf("retained %d bytes above the limit %d", retained, tt.limit)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.wantOverflowed]; overflows != want {
				t.Fatalf("onOverflow called %d times, want %d", overflows, want)
			}
		})
	}
}

func TestHeadBuffer(t *testing.T) {
	w := &headBuffer{limit: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; stderr must never fail the module", s, n, err)
		}
	}
	if got := w.String(); got != "abcde…[stderr truncated]" {
		t.Fatalf("got %q", got)
	}
}

func TestMemoryGuard(t *testing.T) {
	g := &memoryGuard{limit: 4 * wasmPageSize}
	mem := g.Allocate(wasmPageSize, 1<<32)
	steps := []struct {
		size    uint64
		wantNil bool
	}{
		{size: wasmPageSize},
		{size: 3 * wasmPageSize},
		{size: 4 * wasmPageSize},
		{size: 5 * wasmPageSize, wantNil: true},
	}
	var prev []byte
	for _, s := range steps {
		buf := mem.Reallocate(s.size)
		if (buf == nil) != s.wantNil {
			t.Fatalf("Reallocate(%d) = %d bytes, want nil %v", s.size, len(buf), s.wantNil)
		}
		if buf == nil {
			continue
		}
		if uint64(len(buf)) != s.size || uint64(cap(buf)) > g.limit {
			t.Fatalf("Reallocate(%d): len %d cap %d, limit %d", s.size, len(buf), cap(buf), g.limit)
		}
		if len(prev) > 0 && buf[len(prev)-1] != 0x5a {
			t.Fatal("growth lost the old contents")
		}
		for i := len(prev); i < len(buf); i++ {
			if buf[i] != 0 {
				t.Fatalf("new memory at %d is not zero", i)
			}
		}
		buf[len(buf)-1] = 0x5a
		prev = buf
	}
	if !g.refused.Load() || g.peak.Load() != 4*wasmPageSize {
		t.Fatalf("refused %v peak %d", g.refused.Load(), g.peak.Load())
	}
}

func TestScratchQuota(t *testing.T) {
	q := &scratchQuota{limit: 100}
	steps := []struct {
		n    int64
		want bool
	}{{60, true}, {41, false}, {40, true}, {1, false}, {0, true}}
	for i, s := range steps {
		if got := q.charge(s.n); got != s.want {
			t.Fatalf("step %d charge(%d) = %v, want %v (used %d)", i, s.n, got, s.want, q.used.Load())
		}
	}
}

func TestIsGoRuntimeCrash(t *testing.T) {
	const trace = "\n\ngoroutine 1 [running]:\nmain.main()\n"
	tests := []struct {
		name   string
		code   uint32
		stderr string
		want   bool
	}{
		{name: "panic", code: 2, stderr: "panic: boom" + trace, want: true},
		{name: "panic after log lines", code: 2, stderr: "starting\npanic: boom" + trace, want: true},
		{name: "fatal error", code: 2, stderr: "fatal error: all goroutines are asleep - deadlock!" + trace, want: true},
		{name: "usage error with status 2", code: 2, stderr: "wc: invalid input: unexpected EOF\n"},
		{name: "panic text with another status", code: 1, stderr: "panic: boom" + trace},
		{name: "panic word mid-line", code: 2, stderr: "do not panic: fine goroutine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isGoRuntimeCrash(tt.code, tt.stderr); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestModuleErrorMessage(t *testing.T) {
	long := strings.Repeat("é", maxStderrInMessage) // 2 bytes each: the cut must not split one
	tests := []struct {
		name string
		err  *ModuleError
		want string
	}{
		{name: "no stderr", err: &ModuleError{ToolID: "t", Detail: "timed out after 1s"}, want: `sandbox: tool "t": timed out after 1s`},
		{name: "stderr trimmed", err: &ModuleError{ToolID: "t", Detail: "exit status 3", Stderr: "  bad input\n"}, want: `sandbox: tool "t": exit status 3: stderr: bad input`},
		{name: "long stderr truncated", err: &ModuleError{ToolID: "t", Detail: "exit status 1", Stderr: long}, want: `sandbox: tool "t": exit status 1: stderr: ` + strings.Repeat("é", maxStderrInMessage/2) + "…[truncated]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	if errors.Is(&ModuleError{Kind: KindExit}, ErrModuleUnavailable) {
		t.Error("an exit failure must not look unavailable: the tool ran")
	}
	if !errors.Is(&ModuleError{Kind: KindInstantiate}, ErrModuleUnavailable) {
		t.Error("an instantiation failure must be unavailable: the tool did not run")
	}
}
