package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Check them with errors.Is; every error the engine returns wraps at
// most one of them together with the detail that caused it.
var (
	// ErrModuleUnavailable reports that a tool cannot run because its module is not
	// there: the file is missing or unreadable at Load, the tool id was never loaded
	// (or was unloaded) at Invoke, or the module could not be instantiated. In every
	// case no tool code ran, so the sandbox-exec service maps this error to the
	// contracts' "unavailable before dispatch" outcome, which is safe to report or
	// retry without breaking exactly-once.
	ErrModuleUnavailable = errors.New("sandbox: module unavailable")

	// ErrModuleInvalid reports a module file that exists but is not an acceptable tool:
	// it does not decode or validate as WebAssembly, imports anything other than
	// wasi_snapshot_preview1 functions, is not a WASI command (no _start export), or
	// needs more initial memory than its configured limit. Errors wrapping it also wrap
	// ErrModuleUnavailable, because the tool cannot be dispatched either way.
	ErrModuleInvalid = errors.New("sandbox: module invalid")

	// ErrInvalidConfig reports engine options or a tool configuration that are out of
	// range (negative limits, a memory limit above 4 GiB, an empty tool id, ...).
	ErrInvalidConfig = errors.New("sandbox: invalid configuration")

	// ErrInvalidRequest reports an Invoke request the engine refuses before running
	// anything, such as an operation id containing a NUL byte.
	ErrInvalidRequest = errors.New("sandbox: invalid request")

	// ErrClosed reports a call on an engine after Close, and is the cause wrapped by a
	// KindCanceled ModuleError for calls that were running when Close began.
	ErrClosed = errors.New("sandbox: engine closed")
)

// Kind classifies why a tool call failed inside the sandbox. The service uses it to
// choose between a tool error reported to the model (every kind except KindCanceled
// and KindInstantiate) and a retry or an unavailable-before-dispatch outcome.
type Kind string

const (
	// KindTrap: the module aborted abnormally. Either WebAssembly trapped
	// (unreachable, out-of-bounds access, stack overflow, ...) or the Go runtime
	// reported a panic or fatal error: Go's wasip1 port turns what would be a trap in
	// other languages into exit status 2 with a "panic: " or "fatal error: " report and a
	// goroutine trace on stderr, and the engine recognises that convention so a crash
	// has one kind whatever the source language. A module can fake the Go report, which
	// only changes how its own failure is labelled.
	KindTrap Kind = "trap"
	// KindTimeout: the module ran longer than its configured time limit and was stopped.
	KindTimeout Kind = "timeout"
	// KindMemory: the module asked for more linear memory than its limit allows and
	// then failed. A module that survives a refused allocation and exits 0 succeeds.
	KindMemory Kind = "memory"
	// KindExit: the module exited with a non-zero status of its own accord.
	KindExit Kind = "exit"
	// KindOutputTooLarge: the module wrote more to stdout than its output limit; it was
	// stopped at the first write past the limit and its output is discarded.
	KindOutputTooLarge Kind = "output_too_large"
	// KindInstantiate: a fresh instance of the module could not be created, so no tool
	// code ran. Errors of this kind also satisfy errors.Is(err, ErrModuleUnavailable).
	KindInstantiate Kind = "instantiate"
	// KindCanceled: the call was abandoned because the caller's context ended or the
	// engine is closing, not because of anything the module did. The error wraps the
	// cause (context.Canceled, context.DeadlineExceeded or ErrClosed). The tool may have
	// run partially; since the sandbox has no external side effects it can be rerun.
	KindCanceled Kind = "canceled"
)

// maxStderrInMessage bounds how much of the captured stderr Error() repeats, so a
// chatty module cannot turn one error line into kilobytes of log.
const maxStderrInMessage = 1024

// ModuleError is the typed failure of one tool call that reached the sandbox. Obtain it
// with errors.As. It is a value the service can serialise into a tool result: every
// field is plain data, and Err is kept only for errors.Is/As on the cause.
type ModuleError struct {
	// Kind says why the call failed.
	Kind Kind
	// ToolID is the tool whose module failed.
	ToolID string
	// ExitCode is the module's exit status for KindExit and for KindTrap reported by
	// the Go runtime (2); zero otherwise.
	ExitCode uint32
	// Stderr is what the module wrote to stderr, capped at EngineOptions.MaxStderrBytes.
	Stderr string
	// Detail is a one-line human-readable description, e.g. "timed out after 2s" or
	// "output exceeds 1048576 bytes".
	Detail string
	// Err is the underlying cause when there is one (a wazero error, a context error,
	// ErrClosed); it is exposed through Unwrap.
	Err error
}

// Error renders the failure with the tool id, the detail and at most
// maxStderrInMessage bytes of stderr, so the message alone explains the failure.
func (e *ModuleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sandbox: tool %q: %s", e.ToolID, e.Detail)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		b.WriteString(": stderr: ")
		b.WriteString(truncateUTF8(s, maxStderrInMessage))
	}
	return b.String()
}

// Unwrap exposes the underlying cause to errors.Is and errors.As.
func (e *ModuleError) Unwrap() error { return e.Err }

// Is makes an instantiation failure match ErrModuleUnavailable: no tool code ran, which
// is exactly what the service needs to know.
func (e *ModuleError) Is(target error) bool {
	return target == ErrModuleUnavailable && e.Kind == KindInstantiate
}

// truncateUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence and marks
// the cut, so truncated stderr stays valid text in JSON results.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…[truncated]"
}

// invalidModule builds an error that wraps both ErrModuleUnavailable and
// ErrModuleInvalid, with a formatted detail.
func invalidModule(toolID, format string, args ...any) error {
	return fmt.Errorf("%w: %w: tool %q: %s", ErrModuleUnavailable, ErrModuleInvalid, toolID, fmt.Sprintf(format, args...))
}
