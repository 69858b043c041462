package execcore

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// TimedOutMessage is the execution error of a call that reached its timeout; the model sees
// "tool execution failed: timed out".
const TimedOutMessage = "timed out"

// errTimedOut is the cancellation cause of a tool context whose timeout fired, which tells
// the tool's own deadline apart from the executor shutting down.
var errTimedOut = errors.New("tool timeout reached")

// abortError means the handler must stop without committing anything — the executor is
// shutting down or a test fault fired — so the request message is redelivered and the
// call recovers by policy.
type abortError struct{ err error }

func (a *abortError) Error() string { return "execution aborted: " + a.err.Error() }
func (a *abortError) Unwrap() error { return a.err }

// result is what one invocation goroutine reports.
type result struct {
	out   contracts.ToolOutput
	err   error
	abort error
}

// run invokes the tool for inv, retrying UnavailableBeforeDispatch failures locally with
// back-off. It returns the output to commit — error outputs included — or an error when
// the handler must abort without committing.
func (x *Executor) run(ctx context.Context, inv Invocation) (contracts.ToolOutput, error) {
	timeout := x.timeoutFor(inv.ToolID)
	delay := x.opts.RetryBackoff
	for try := 0; ; try++ {
		out, err := x.invokeOnce(ctx, inv, timeout)
		var ab *abortError
		if errors.As(err, &ab) {
			return contracts.ToolOutput{}, ab
		}
		if err == nil {
			return out, nil
		}
		if contracts.IsUnavailableBeforeDispatch(err) && try < x.opts.UnavailableRetries {
			zerolog.Ctx(ctx).Info().Err(err).Int("retry", try+1).Dur("delay", delay).
				Msg("executor unavailable before dispatch; retrying (not a replay)")
			if err := ctxsleep.Sleep(ctx, delay); err != nil {
				return contracts.ToolOutput{}, &abortError{err: err}
			}
			delay = min(delay*2, x.opts.MaxRetryBackoff)
			continue
		}
		if !contracts.IsUnavailableBeforeDispatch(err) {
			zerolog.Ctx(ctx).Info().Err(err).Msg("tool failed; committing its error output")
		}
		return contracts.ErrorToOutput(inv.CallID, err), nil
	}
}

// invokeOnce runs one invocation under the tool timeout on its own goroutine, so that a
// body that ignores its context cannot hold the handler past the timeout, and a panic in it
// becomes an execution error instead of killing the process.
func (x *Executor) invokeOnce(ctx context.Context, inv Invocation, timeout time.Duration) (contracts.ToolOutput, error) {
	base := tool.WithInvocation(ctx, inv)
	var (
		tctx   context.Context
		cancel context.CancelFunc
	)
	if timeout > 0 {
		tctx, cancel = context.WithTimeoutCause(base, timeout, errTimedOut)
	} else {
		tctx, cancel = context.WithCancel(base)
	}
	defer cancel()

	done := make(chan result, 1) // buffered: an abandoned body can still report and exit
	go x.call(tctx, inv, done)

	var r result
	select {
	case r = <-done:
	case <-tctx.Done():
		select {
		case r = <-done: // it finished at the same moment: keep what it said
		default:
			if out, ok := x.awaitAcknowledgement(ctx, done); ok {
				return out, nil
			}
			if err := ctx.Err(); err != nil {
				return contracts.ToolOutput{}, &abortError{err: err}
			}
			zerolog.Ctx(ctx).Warn().Dur("timeout", timeout).
				Msg("tool did not return by its timeout; its result will be discarded")
			return contracts.ToolOutput{}, contracts.ExecutionFailed(TimedOutMessage)
		}
	}
	if r.abort != nil {
		return contracts.ToolOutput{}, &abortError{err: r.abort}
	}
	if acknowledgesCancel(ctx, r) {
		return r.out, nil
	}
	if err := ctx.Err(); err != nil {
		return contracts.ToolOutput{}, &abortError{err: err}
	}
	if r.err != nil && errors.Is(context.Cause(tctx), errTimedOut) {
		return contracts.ToolOutput{}, contracts.ExecutionFailed(TimedOutMessage)
	}
	return r.out, r.err
}

// call runs the Invoker and the in-tool fault point, reporting on done exactly once. The
// point is a step of the call's operation run here, inside the tool body's goroutine
// while the call is entered ([pipeline.Env.Apply]): after the body returned and before
// the handler's next step can commit its outcome, which is the crash a redelivery must
// recover by the call's policy.
func (x *Executor) call(ctx context.Context, inv Invocation, done chan<- result) {
	defer func() {
		if p := recover(); p != nil {
			zerolog.Ctx(ctx).Error().Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).
				Msg("tool panicked; committing an execution error")
			done <- result{err: contracts.ExecutionFailed(fmt.Sprintf("panic: %v", p))}
		}
	}()
	var out contracts.ToolOutput
	var err error
	// The tool's own error is its result; only the fault point's aborts the call.
	if ferr := x.env.Apply(ctx, x.opts.Service, pipeline.Effects{Op: inv.OperationID, Steps: []pipeline.Effect{
		pipeline.Step(pipeline.FaultInTool, func(ctx context.Context) (bool, error) {
			out, err = x.opts.Invoker.Invoke(ctx, inv)
			return true, nil
		}),
	}}); ferr != nil {
		done <- result{abort: ferr}
		return
	}
	done <- result{out: out, err: err}
}

// timeoutFor is the configured timeout of toolID, else the executor default.
func (x *Executor) timeoutFor(toolID string) time.Duration {
	if x.opts.ToolTimeout != nil {
		return x.opts.ToolTimeout(toolID)
	}
	if x.env.Config != nil {
		if t, ok := x.env.Config.Tool(toolID); ok && t.Timeout > 0 {
			return t.Timeout.D()
		}
	}
	return x.opts.DefaultTimeout
}
