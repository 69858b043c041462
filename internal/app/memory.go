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
