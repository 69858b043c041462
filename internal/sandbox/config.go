package sandbox

import (
	"cmp"
	"fmt"
	"runtime"
	"time"
)

// Defaults applied to zero-valued options. They are conservative: a tool that needs more
// must say so in its configuration.
const (
	// DefaultMemoryLimitMiB is the linear-memory limit of a tool that sets none. A Go
	// wasip1 module starts at about 2.5 MiB and grows its heap from there.
	DefaultMemoryLimitMiB = 64
	// DefaultTimeout is the wall-clock limit of one call of a tool that sets none.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxOutputBytes caps what a tool may write to stdout (1 MiB).
	DefaultMaxOutputBytes = 1 << 20
	// DefaultMaxStderrBytes caps how much stderr is kept for the error (64 KiB).
	DefaultMaxStderrBytes = 64 << 10
	// DefaultScratchMaxBytes caps what a tool may write into its scratch directory
	// (64 MiB), so a module cannot fill the host's disk.
	DefaultScratchMaxBytes = 64 << 20
	// DefaultMaxModuleBytes caps the size of a module file read by Load (256 MiB).
	DefaultMaxModuleBytes = 256 << 20

	// maxMemoryLimitMiB is the 32-bit WebAssembly address space: 65536 pages of 64 KiB.
	maxMemoryLimitMiB = 4096
	// wasmPageSize is the WebAssembly page size in bytes.
	wasmPageSize = 1 << 16
	// ScratchGuestPath is where the per-call scratch directory appears inside the module.
	ScratchGuestPath = "/scratch"
	// EnvOperationID names the environment variable carrying the call's durable
	// operation id.
	EnvOperationID = "AWAKEN_OPERATION_ID"
	// EnvIdempotencyKey names the environment variable carrying the call's idempotency
	// key (contracts.EnvIdempotencyKey), the same for every attempt of the call.
	EnvIdempotencyKey = "AWAKEN_IDEMPOTENCY_KEY"
	// EnvToolID names the environment variable carrying the tool id.
	EnvToolID = "AWAKEN_TOOL_ID"
)

// ModuleConfig is the trusted host configuration of one sandboxed tool. It comes from
// the operator's configuration file, never from a call's arguments. Zero values select
// the engine's defaults (EngineOptions).
type ModuleConfig struct {
	// Path is the WebAssembly (WASI preview 1 command) module file on the host.
	Path string
	// MemoryLimitMiB caps the module's linear memory in MiB (at most 4096). A module
	// that grows past it has the growth refused and fails with KindMemory.
	MemoryLimitMiB int
	// Timeout is the wall-clock limit of one call; the module is stopped when it
	// expires and the call fails with KindTimeout.
	Timeout time.Duration
	// MaxOutputBytes caps stdout; the first write past it stops the module and the call
	// fails with KindOutputTooLarge. Output is never buffered beyond this size.
	MaxOutputBytes int
	// Scratch gives each call a fresh, empty, private directory mounted at /scratch,
	// removed when the call ends. Without it the module sees no filesystem at all.
	Scratch bool
	// ScratchMaxBytes caps the bytes a call may write into its scratch directory
	// (file data plus a fixed charge per created file or directory); writes past it
	// fail inside the module with ENOSPC.
	ScratchMaxBytes int64
}

// EngineOptions configures an Engine. The zero value is usable: every field has a
// default documented on it.
type EngineOptions struct {
	// CacheDir, when set, persists compiled machine code on disk so a restarted
	// process does not recompile unchanged modules. The directory must be private to
	// the service: wazero trusts its contents. Engines of one process with the same
	// CacheDir also share the compiled code in memory. Empty keeps the cache in memory
	// only, private to the engine.
	CacheDir string
	// DefaultMemoryLimitMiB applies to tools whose MemoryLimitMiB is zero
	// (default DefaultMemoryLimitMiB).
	DefaultMemoryLimitMiB int
	// DefaultTimeout applies to tools whose Timeout is zero (default DefaultTimeout).
	DefaultTimeout time.Duration
	// DefaultMaxOutputBytes applies to tools whose MaxOutputBytes is zero
	// (default DefaultMaxOutputBytes).
	DefaultMaxOutputBytes int
	// DefaultScratchMaxBytes applies to tools whose ScratchMaxBytes is zero
	// (default DefaultScratchMaxBytes).
	DefaultScratchMaxBytes int64
	// MaxStderrBytes caps the stderr kept per call (default DefaultMaxStderrBytes);
	// the rest is discarded without failing the module.
	MaxStderrBytes int
	// MaxModuleBytes refuses module files larger than this (default
	// DefaultMaxModuleBytes), so a misconfigured path cannot exhaust memory at Load.
	MaxModuleBytes int64
	// MaxConcurrentCalls bounds how many calls execute at once (default GOMAXPROCS).
	// Modules are CPU-bound, so running more than the cores can serve only makes
	// timeouts fire for reasons unrelated to the tool; the bound also caps the memory
	// the sandbox can use at MaxConcurrentCalls times the largest memory limit.
	// Waiting for a slot does not count against the tool's timeout and ends with the
	// caller's context.
	MaxConcurrentCalls int
	// CompilationWorkers is how many goroutines compile one module's functions in
	// parallel at Load (default GOMAXPROCS). Compiling a Go module takes on the order
	// of a second per core, so this mostly shortens service start-up.
	CompilationWorkers int
	// ScratchRoot is the host directory under which per-call scratch directories are
	// created (default os.TempDir()).
	ScratchRoot string
	// OnInternalError receives errors that belong to no call result, such as a scratch
	// directory that could not be removed. Nil discards them. It may be called from
	// several goroutines at once.
	OnInternalError func(error)
}

// withDefaults returns o with every zero field replaced by its default, or an error
// wrapping ErrInvalidConfig when a field is out of range.
func (o EngineOptions) withDefaults() (EngineOptions, error) {
	o.DefaultMemoryLimitMiB = cmp.Or(o.DefaultMemoryLimitMiB, DefaultMemoryLimitMiB)
	o.DefaultTimeout = cmp.Or(o.DefaultTimeout, DefaultTimeout)
	o.DefaultMaxOutputBytes = cmp.Or(o.DefaultMaxOutputBytes, DefaultMaxOutputBytes)
	o.DefaultScratchMaxBytes = cmp.Or(o.DefaultScratchMaxBytes, DefaultScratchMaxBytes)
	o.MaxStderrBytes = cmp.Or(o.MaxStderrBytes, DefaultMaxStderrBytes)
	o.MaxModuleBytes = cmp.Or(o.MaxModuleBytes, DefaultMaxModuleBytes)
	o.MaxConcurrentCalls = cmp.Or(o.MaxConcurrentCalls, runtime.GOMAXPROCS(0))
	o.CompilationWorkers = cmp.Or(o.CompilationWorkers, runtime.GOMAXPROCS(0))
	return o, checkLimits("Default", o.DefaultMemoryLimitMiB, []limit{
		{"DefaultTimeout", o.DefaultTimeout, o.DefaultTimeout < 0},
		{"DefaultMaxOutputBytes", o.DefaultMaxOutputBytes, o.DefaultMaxOutputBytes < 0},
		{"DefaultScratchMaxBytes", o.DefaultScratchMaxBytes, o.DefaultScratchMaxBytes < 0},
		{"MaxStderrBytes", o.MaxStderrBytes, o.MaxStderrBytes < 0},
		{"MaxModuleBytes", o.MaxModuleBytes, o.MaxModuleBytes < 0},
		{"MaxConcurrentCalls", o.MaxConcurrentCalls, o.MaxConcurrentCalls < 0},
		{"CompilationWorkers", o.CompilationWorkers, o.CompilationWorkers < 0},
	})
}

// limit is one configured limit that must not be negative.
type limit struct {
	name     string
	value    any
	negative bool
}

// checkLimits returns an error wrapping ErrInvalidConfig for the first limit out of
// range: the memory limit (named with prefix) outside 1..maxMemoryLimitMiB, then any of
// limits below zero, in order.
func checkLimits(prefix string, memoryLimitMiB int, limits []limit) error {
	if memoryLimitMiB < 0 || memoryLimitMiB > maxMemoryLimitMiB {
		return fmt.Errorf("%w: %sMemoryLimitMiB %d outside 1..%d", ErrInvalidConfig, prefix, memoryLimitMiB, maxMemoryLimitMiB)
	}
	for _, l := range limits {
		if l.negative {
			return fmt.Errorf("%w: %s %v is negative", ErrInvalidConfig, l.name, l.value)
		}
	}
	return nil
}

// resolve returns c with every zero limit replaced by the engine default, or an error
// wrapping ErrInvalidConfig when a limit is out of range.
func (c ModuleConfig) resolve(o EngineOptions) (ModuleConfig, error) {
	if c.Path == "" {
		return c, fmt.Errorf("%w: module path is empty", ErrInvalidConfig)
	}
	c.MemoryLimitMiB = cmp.Or(c.MemoryLimitMiB, o.DefaultMemoryLimitMiB)
	c.Timeout = cmp.Or(c.Timeout, o.DefaultTimeout)
	c.MaxOutputBytes = cmp.Or(c.MaxOutputBytes, o.DefaultMaxOutputBytes)
	c.ScratchMaxBytes = cmp.Or(c.ScratchMaxBytes, o.DefaultScratchMaxBytes)
	return c, checkLimits("", c.MemoryLimitMiB, []limit{
		{"Timeout", c.Timeout, c.Timeout < 0},
		{"MaxOutputBytes", c.MaxOutputBytes, c.MaxOutputBytes < 0},
		{"ScratchMaxBytes", c.ScratchMaxBytes, c.ScratchMaxBytes < 0},
	})
}

// memoryLimitBytes is the memory limit in bytes.
func (c ModuleConfig) memoryLimitBytes() uint64 { return uint64(c.MemoryLimitMiB) << 20 }
