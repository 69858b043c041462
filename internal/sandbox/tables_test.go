package sandbox

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// tableType encodes a funcref table of min entries, with a maximum when max >= 0.
func tableType(min, max int) []byte {
	if max < 0 {
		return concat([]byte{0x70, 0x00}, uleb(min))
	}
	return concat([]byte{0x70, 0x01}, uleb(min), uleb(max))
}

// sleb encodes n as signed LEB128 (the immediate of i32.const).
func sleb(n int64) []byte {
	var out []byte
	for {
		b := byte(n & 0x7f)
		n >>= 7
		if (n == 0 && b&0x40 == 0) || (n == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// growTable is the body of a _start that grows table 0 by n null entries and traps
// (unreachable) when the grow fails: table.grow yields -1 then.
func growTable(n int64) []byte {
	return concat(
		[]byte{0xd0, 0x70},    // ref.null func
		[]byte{0x41}, sleb(n), // i32.const n
		[]byte{0xfc, 0x0f, 0x00}, // table.grow 0
		[]byte{0x41}, sleb(-1),   // i32.const -1
		[]byte{0x46},                   // i32.eq
		[]byte{0x04, 0x40, 0x00, 0x0b}, // if (a failed grow) unreachable end
	)
}

// tableModule is a WASI command with one table of min entries (max < 0: no maximum)
// whose _start grows it by grow entries.
func tableModule(min, max int, grow int64) []byte {
	spec := commandSpec(growTable(grow))
	spec.tables = [][]byte{tableType(min, max)}
	return spec.encode()
}

// TestTablesAreBounded: a table lives in host memory outside
// memory_limit_mib (8 bytes per entry in wazero), so an unbounded table.grow once took the
// process to out of memory. A table is bounded by MaxTableElements whatever the module
// declares: a grow past it fails in the module (here: a trap, so the call ends with an
// error result), the host allocates nothing for it, and the engine keeps serving. A grow
// within the bound still works, and a module whose table starts above it, or that defines
// two tables, is refused at Load.
func TestTablesAreBounded(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	load := func(id string, binary []byte) error {
		return e.Load(context.Background(), id, ModuleConfig{Path: writeModule(t, id, binary), MemoryLimitMiB: 32})
	}
	for id, binary := range map[string][]byte{
		"grow-within":      tableModule(1, -1, 1000),
		"grow-past":        tableModule(1, -1, MaxTableElements),
		"grow-huge":        tableModule(1, -1, 1<<30),
		"grow-past-max":    tableModule(1, 1<<30, MaxTableElements),
		"grow-declared-ok": tableModule(1, 100, 99),
	} {
		if err := load(id, binary); err != nil {
			t.Fatalf("Load %s: %v", id, err)
		}
	}
	for _, id := range []string{"grow-within", "grow-declared-ok"} {
		if _, err := e.Invoke(context.Background(), Request{ToolID: id}); err != nil {
			t.Errorf("%s: %v, want success", id, err)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, id := range []string{"grow-past", "grow-past-max", "grow-huge"} {
		res, err := e.Invoke(context.Background(), Request{ToolID: id})
		if err == nil {
			t.Fatalf("%s: the grow past %d entries succeeded (%+v)", id, MaxTableElements, res)
		}
		if me := asModuleError(t, err); me.Kind != KindTrap {
			t.Errorf("%s: kind %s, want trap: %v", id, me.Kind, err)
		}
		t.Logf("%s: %v", id, err)
	}
	runtime.ReadMemStats(&after)
	if grown := int64(after.TotalAlloc) - int64(before.TotalAlloc); grown > 64<<20 {
		t.Errorf("the refused grows allocated %d MiB of host memory", grown>>20)
	}
	// The engine still serves.
	if _, err := e.Invoke(context.Background(), Request{ToolID: "grow-within"}); err != nil {
		t.Errorf("after the refused grows: %v", err)
	}

	two := commandSpec(opNop)
	two.tables = [][]byte{tableType(1, 1), tableType(1, 1)}
	for name, tc := range map[string]struct {
		binary []byte
		want   string
	}{
		"table above the bound": {tableModule(MaxTableElements+1, -1, 0), "initial entries, above the limit"},
		"two tables":            {two.encode(), "at most 1"},
	} {
		err := load("refused", tc.binary)
		if !errors.Is(err, ErrModuleInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load error %v, want ErrModuleInvalid with %q", name, err, tc.want)
		}
	}
}
