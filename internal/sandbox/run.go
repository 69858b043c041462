package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
)

// One run of a module: its sandboxed instance, and what its end means for the call.

// run executes one call of t and classifies its outcome.
func (e *Engine) run(ctx context.Context, t *tool, req Request) (Result, error) {
	cfg := t.cfg
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopOnClose := context.AfterFunc(e.closing, func() { cancel(ErrClosed) })
	defer stopOnClose()
	runCtx, cancelTimeout := context.WithTimeoutCause(callCtx, cfg.Timeout, errTimeout)
	defer cancelTimeout()

	rec := &callRecord{
		stdout: &outputBuffer{limit: cfg.MaxOutputBytes, onOverflow: func() { cancel(errOutputLimit) }},
		stderr: &headBuffer{limit: e.opts.MaxStderrBytes},
		memory: &memoryGuard{limit: cfg.memoryLimitBytes()},
	}
	// The instance is anonymous, so instances of one module run side by side and no
	// guest can import another. No start function runs at instantiation: _start is
	// called below, which tells a failure to instantiate from a failure of the tool.
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithArgs(t.id).
		WithEnv(EnvToolID, t.id).
		WithStdin(bytes.NewReader(req.Args)).
		WithStdout(rec.stdout).
		WithStderr(rec.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(sleepUntilDone(runCtx)).
		WithRandSource(rand.Reader)
	if req.OperationID != "" {
		mc = mc.WithEnv(EnvOperationID, req.OperationID)
	}
	if req.IdempotencyKey != "" {
		mc = mc.WithEnv(EnvIdempotencyKey, req.IdempotencyKey)
	}
	if cfg.Scratch {
		dir, err := os.MkdirTemp(e.opts.ScratchRoot, "awaken-scratch-")
		if err != nil {
			return Result{}, &ModuleError{Kind: KindInstantiate, ToolID: t.id, Detail: "create scratch directory: " + err.Error(), Err: err}
		}
		rec.scratchDir = dir
		defer e.removeScratch(dir)
		fsc, ok := wazero.NewFSConfig().(sysfs.FSConfig)
		if !ok {
			return Result{}, &ModuleError{Kind: KindInstantiate, ToolID: t.id, Detail: "this wazero cannot mount a custom file system"}
		}
		mc = mc.WithFSConfig(fsc.WithSysFSMount(newScratchFS(dir, cfg.ScratchMaxBytes), ScratchGuestPath))
	}

	mod, err := e.runtime.InstantiateModule(experimental.WithMemoryAllocator(runCtx, rec.memory), t.module.mod, mc)
	if err != nil {
		if me := stopped(t, runCtx); me != nil {
			return Result{}, me
		}
		return Result{}, &ModuleError{Kind: KindInstantiate, ToolID: t.id, Detail: "instantiate: " + firstLine(err.Error()), Err: err}
	}
	defer mod.Close(context.WithoutCancel(ctx))
	if e.beforeStart != nil {
		e.beforeStart()
	}
	_, callErr := mod.ExportedFunction("_start").Call(runCtx)
	if e.observe != nil {
		e.observe(rec)
	}
	return classify(t, runCtx, rec, callErr)
}

// classify turns the end of a call into a Result or a *ModuleError. Facts the engine
// observed itself (output overflow, its own deadline, a refused memory growth) take
// precedence over what the module reported. The output overflow is checked first and
// even after exit status 0, because the module was stopped or lost output either way;
// its wazero exit error is not wrapped (see stopped).
func classify(t *tool, runCtx context.Context, rec *callRecord, callErr error) (Result, error) {
	cfg := t.cfg
	stdout, overflowed, _, _ := rec.stdout.snapshot()
	stderr := rec.stderr.String()
	if overflowed {
		return Result{}, &ModuleError{Kind: KindOutputTooLarge, ToolID: t.id, Stderr: stderr,
			Detail: fmt.Sprintf("output exceeds %d bytes", cfg.MaxOutputBytes)}
	}
	var exit *sys.ExitError
	isExit := errors.As(callErr, &exit)
	if callErr == nil || (isExit && exit.ExitCode() == 0 && context.Cause(runCtx) == nil) {
		return Result{
			Stdout:          stdout,
			IsJSON:          len(stdout) > 0 && json.Valid(stdout),
			Stderr:          stderr,
			PeakMemoryBytes: rec.memory.peak.Load(),
		}, nil
	}
	if me := stopped(t, runCtx); me != nil {
		me.Stderr = stderr
		return Result{}, me
	}
	me := &ModuleError{ToolID: t.id, Stderr: stderr, Err: callErr}
	if isExit {
		me.ExitCode = exit.ExitCode()
	}
	switch {
	case rec.memory.refused.Load():
		me.Kind = KindMemory
		me.Detail = fmt.Sprintf("memory limit of %d MiB exceeded", cfg.MemoryLimitMiB)
	case isExit && isGoRuntimeCrash(me.ExitCode, stderr):
		me.Kind = KindTrap
		me.Detail = fmt.Sprintf("Go runtime crashed (exit status %d)", me.ExitCode)
	case isExit:
		me.Kind = KindExit
		me.Detail = fmt.Sprintf("exit status %d", me.ExitCode)
	default:
		me.Kind = KindTrap
		me.Detail = "trap: " + firstLine(callErr.Error())
	}
	return Result{}, me
}

// stopped returns the ModuleError of a call that the engine or the caller stopped (its
// context is done), or nil when the call ended by itself. wazero reports such a stop as
// a *sys.ExitError that matches context.Canceled or context.DeadlineExceeded; it is
// deliberately not wrapped, so that only KindCanceled errors match context errors and
// the service cannot mistake the tool's own time limit for its caller's deadline.
func stopped(t *tool, runCtx context.Context) *ModuleError {
	cause := context.Cause(runCtx)
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, errTimeout):
		return &ModuleError{Kind: KindTimeout, ToolID: t.id, Detail: fmt.Sprintf("timed out after %s", t.cfg.Timeout)}
	case errors.Is(cause, ErrClosed):
		return canceled(t.id, "engine closed during the call", ErrClosed)
	default:
		return canceled(t.id, "call canceled: "+cause.Error(), cause)
	}
}

// canceled builds a KindCanceled error wrapping cause.
func canceled(toolID, detail string, cause error) *ModuleError {
	return &ModuleError{Kind: KindCanceled, ToolID: toolID, Detail: detail, Err: cause}
}

// isGoRuntimeCrash recognises how Go's wasip1 runtime dies: exit status 2 after a
// "panic: " or "fatal error: " report followed by goroutine traces.
func isGoRuntimeCrash(code uint32, stderr string) bool {
	if code != 2 {
		return false
	}
	report := false
	for _, prefix := range []string{"panic: ", "fatal error: "} {
		if strings.HasPrefix(stderr, prefix) || strings.Contains(stderr, "\n"+prefix) {
			report = true
		}
	}
	return report && strings.Contains(stderr, "goroutine ")
}

// sleepUntilDone implements WASI sleeping (poll_oneoff on a clock) with the host's
// timers, cut short when the call's context ends: wazero can stop a module only when
// it is running WebAssembly, so a host-side sleep must not outlive the time limit.
func sleepUntilDone(ctx context.Context) sys.Nanosleep {
	return func(ns int64) {
		if ns <= 0 {
			return
		}
		_ = ctxsleep.Sleep(ctx, time.Duration(ns))
	}
}

// removeScratch deletes a call's scratch directory and reports a failure to
// OnInternalError; the call's result does not depend on it.
func (e *Engine) removeScratch(dir string) {
	if err := os.RemoveAll(dir); err != nil && e.opts.OnInternalError != nil {
		e.opts.OnInternalError(fmt.Errorf("sandbox: remove scratch directory %s: %w", dir, err))
	}
}

// firstLine returns the first line of s; wazero appends a multi-line wasm stack trace
// to trap messages, which belongs in Err, not in the one-line Detail.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
