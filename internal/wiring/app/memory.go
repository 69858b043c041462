package app

import (
	"os"
	"runtime/debug"
)

// DevMemoryLimit is the soft memory limit `awaken dev` gives the Go runtime when the
// GOMEMLIMIT environment variable sets none. One dev process holds the NATS server, its
// per-stream write buffers (8 MiB for each busy stream, 4 MiB for each busy bucket and for
// each atomic publish in flight) and all six services; with the runtime's default
// (collect when the heap doubles) that process reached about 300 MiB of RSS under the
// throughput benchmark with a live heap of 130–150 MiB at its end. Under the limit the
// collector runs earlier: `make bench` measured a peak RSS of about 190 MiB and no
// throughput loss beyond the run-to-run noise (docs/benchmarks.md, "Memory").
//
// The limit bounds the runtime's own memory (the process's anonymous resident pages), not
// its whole RSS: the executable's code, mapped from its file, adds 32–34 MiB the limit
// does not count. In a 100k-call soak with a 2-minute retention the anonymous part stayed
// at 150–170 MiB: once records expire, the server holds two message blocks of each busy
// store (the oldest, being expired, and the newest, being written; 8 MiB for a stream,
// 4 MiB for a bucket), a live heap of about 130 MB, and the collector runs near the limit
// (docs/benchmarks.md, "Soak").
const DevMemoryLimit = 160 << 20

// LimitDevMemory sets [DevMemoryLimit] as the runtime's soft memory limit unless
// GOMEMLIMIT is set (a size, or "off" for none), and returns the limit in effect.
func LimitDevMemory() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1) // reads the limit the runtime took from GOMEMLIMIT
	}
	debug.SetMemoryLimit(DevMemoryLimit)
	return DevMemoryLimit
}
