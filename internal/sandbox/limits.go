package sandbox

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// errOutputLimit is returned to the module by a write past its output limit, and is the
// cancellation cause that stops it.
var errOutputLimit = errors.New("output limit exceeded")

// outputBuffer is the module's stdout: a bounded buffer that stops accepting at its
// limit. Its backing array never grows past the limit, so a module that writes 100 MiB
// costs the host at most the limit. The first rejected write calls onOverflow, which
// cancels the call so the module is stopped promptly even if it ignores write errors.
//
// Writes come from the goroutine running the module, but the mutex keeps the type safe
// if a future wazero delivers them elsewhere.
type outputBuffer struct {
	mu         sync.Mutex
	buf        []byte
	limit      int
	overflowed bool
	offered    int64 // bytes the module tried to write, accepted or not
	onOverflow func()
}

// Write appends p if it fits under the limit; otherwise it keeps nothing of p, marks the
// buffer overflowed and fails this and every later write.
func (w *outputBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.offered += int64(len(p))
	if w.overflowed {
		return 0, errOutputLimit
	}
	if len(p) > w.limit-len(w.buf) {
		w.overflowed = true
		if w.onOverflow != nil {
			w.onOverflow()
		}
		return 0, errOutputLimit
	}
	if need := len(w.buf) + len(p); need > cap(w.buf) {
		// Grow geometrically but never past the limit.
		newCap := max(need, min(2*cap(w.buf), w.limit), 512)
		newCap = min(newCap, w.limit)
		grown := make([]byte, len(w.buf), newCap)
		copy(grown, w.buf)
		w.buf = grown
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// snapshot returns the accepted bytes, whether the limit was hit, and the capacity of
// the backing array (what the host actually holds).
func (w *outputBuffer) snapshot() (data []byte, overflowed bool, retained int, offered int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf, w.overflowed, cap(w.buf), w.offered
}

// headBuffer keeps the first limit bytes written to it and silently drops the rest. It
// is the module's stderr: diagnostics are best effort, so a chatty module is not failed
// for them, and the head is kept because panics and usage errors print there first.
type headBuffer struct {
	mu        sync.Mutex
	buf       []byte
	limit     int
	truncated bool
}

// Write keeps what fits and reports the whole of p as written.
func (w *headBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.limit - len(w.buf)
	if len(p) > room {
		w.truncated = true
		w.buf = append(w.buf, p[:max(room, 0)]...)
	} else {
		w.buf = append(w.buf, p...)
	}
	return len(p), nil
}

// String returns the kept bytes, marked when the rest was dropped.
func (w *headBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.truncated {
		return string(w.buf) + "…[stderr truncated]"
	}
	return string(w.buf)
}

// memoryGuard is a per-call wazero memory allocator that enforces the tool's memory
// limit and records what happened. wazero's own limit (RuntimeConfig
// WithMemoryLimitPages) is per runtime; the allocator lets one shared runtime, and one
// compiled module, serve tools with different limits, and it tells the engine for
// certain that a growth was refused, so a memory failure is classified from fact rather
// than guessed from the module's stderr.
type memoryGuard struct {
	limit   uint64
	refused atomic.Bool
	peak    atomic.Uint64
}

var _ experimental.MemoryAllocator = (*memoryGuard)(nil)

// Allocate creates the linear memory of one module instance. The instance's minimum is
// checked against the limit at Load, so the first Reallocate always fits.
func (g *memoryGuard) Allocate(capacity, _ uint64) experimental.LinearMemory {
	return &guardedMemory{guard: g, capHint: min(capacity, g.limit)}
}

// guardedMemory is a growable []byte that refuses to grow past its guard's limit.
type guardedMemory struct {
	guard   *memoryGuard
	buf     []byte
	capHint uint64
}

// Reallocate grows the memory to size bytes, or returns nil (memory.grow yields -1 in
// the module) when size exceeds the limit. Bytes between the old and new length were
// never visible to the module and are zero, as WebAssembly requires, because every
// backing array comes from make and linear memory never shrinks.
func (m *guardedMemory) Reallocate(size uint64) []byte {
	g := m.guard
	if size > g.limit {
		g.refused.Store(true)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
	} else {
		newCap := min(max(size, 2*uint64(cap(m.buf)), m.capHint), g.limit)
		grown := make([]byte, size, newCap)
		copy(grown, m.buf)
		m.buf = grown
	}
	for {
		peak := g.peak.Load()
		if size <= peak || g.peak.CompareAndSwap(peak, size) {
			break
		}
	}
	return m.buf
}

// Free drops the backing array so the garbage collector can reclaim it.
func (m *guardedMemory) Free() { m.buf = nil }
