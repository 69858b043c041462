// Package sandbox runs awaken's dangerous tools as WebAssembly: WASI preview 1 command
// modules executed by wazero (pure Go, no cgo) inside the sandbox-exec service.
//
// # Calling convention
//
// A tool is a module exporting _start and its memory. Each call runs a fresh instance
// with the tool's JSON arguments on stdin; whatever it writes to stdout is the result
// (Result.IsJSON says whether that is one JSON value); stderr is captured for the error.
// Exit status 0 is success; anything else is a *ModuleError whose message includes the
// beginning of stderr. argv is [tool id]; the environment holds only AWAKEN_TOOL_ID,
// AWAKEN_OPERATION_ID (the call's durable operation id) and AWAKEN_IDEMPOTENCY_KEY (the
// key to send to a system that deduplicates requests, the same for every attempt).
//
// # Isolation
//
//   - Host functions: only wasi_snapshot_preview1. Load refuses a module importing
//     anything else (and any WASI function with a mismatched signature), so a module
//     wanting "env" or socket extensions fails up front with a clear error. WASI preview
//     1 cannot create sockets and no sockets are pre-opened, so there is no network.
//   - Filesystem: none, unless the tool's configuration sets Scratch; then a fresh empty
//     directory is mounted at /scratch for the call and removed after it. Symlink
//     creation is refused there (wazero's directory mount would follow symlinks out of
//     it) and writes are metered by a quota.
//   - Environment, clocks: no host variables; real wall and monotonic clocks (sleeps end
//     with the call), cryptographic randomness, and no time-zone database (UTC).
//   - Limits per tool: linear memory (a per-call allocator refuses growth past the
//     limit), wall-clock time (the instance is closed when its context ends), and stdout
//     size (a bounded buffer that stops accepting, and stops the module, at the limit).
//     EngineOptions.MaxConcurrentCalls bounds how many calls run at once.
//
// A module that traps, loops, exhausts its memory, floods its output or crashes fails
// only its own call; the engine keeps serving.
//
// # Errors and the service
//
// ModuleError.Kind tells the sandbox-exec service what to do:
//
//   - KindExit, KindTrap, KindTimeout, KindMemory, KindOutputTooLarge: the tool ran and
//     failed; report the error as the tool's result.
//   - KindCanceled: the caller's context ended or the engine is closing; nothing is
//     decided about the call, so leave the message for redelivery. Only this kind
//     matches context.Canceled or context.DeadlineExceeded with errors.Is.
//   - ErrModuleUnavailable (which KindInstantiate errors also match): no tool code ran;
//     map it to the contracts' "unavailable before dispatch" outcome.
//
// # Compilation cache
//
// Load compiles each distinct module content once (keyed by SHA-256, shared by every
// tool id using that content) and keeps the machine code while a tool or a running call
// uses it; EngineOptions.CacheDir also persists it across restarts and shares it with
// the other engines of the process that use the same directory.
package sandbox
