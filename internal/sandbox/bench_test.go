package sandbox

import (
	"context"
	"testing"
)

var benchArgs = []byte(`{"text":"the quick brown fox\njumps over the lazy dog\n"}`)

// BenchmarkInvokeWarm measures one call of the wc tool on a loaded engine: a fresh
// module instance, the Go runtime's start-up inside it, the tool, and teardown.
func BenchmarkInvokeWarm(b *testing.B) {
	e := newTestEngine(b, EngineOptions{})
	mustLoad(b, e, "wc", "wc", ModuleConfig{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Invoke(ctx, Request{ToolID: "wc", OperationID: "op", Args: benchArgs}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInvokeCold measures the first call of a process: a new engine, compiling the
// wc module to machine code with no cache, the call, and Close.
func BenchmarkInvokeCold(b *testing.B) {
	benchmarkCold(b, func(*testing.B) string { return "" })
}

// BenchmarkInvokeColdDiskCache is BenchmarkInvokeCold with a populated on-disk
// compilation cache: a restarted service whose modules did not change.
func BenchmarkInvokeColdDiskCache(b *testing.B) {
	dir := b.TempDir()
	benchmarkCold(b, func(*testing.B) string { return dir })
}

func benchmarkCold(b *testing.B, cacheDir func(*testing.B) string) {
	ctx := context.Background()
	path := modulePath("wc")
	run := func() {
		e, err := NewEngine(ctx, EngineOptions{CacheDir: cacheDir(b)})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Load(ctx, "wc", ModuleConfig{Path: path}); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Invoke(ctx, Request{ToolID: "wc", Args: benchArgs}); err != nil {
			b.Fatal(err)
		}
		if err := e.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	run() // populates the disk cache when there is one
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
}
