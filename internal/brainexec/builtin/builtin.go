// Package builtin holds the example Brain tools shipped with awaken. Their behaviour is
// part of the acceptance tests, so it is exact:
//
//   - echo {text} returns text.
//   - counter {name} increments the durable counter "counter.{name}" in the counters bucket
//     (decimal ASCII, compare-and-swap) and returns the new value as text. It is
//     non_recoverable: replaying it would count twice.
//   - slow {ms} sleeps ms milliseconds (ending early when its context ends) and returns
//     "done".
//   - lookup {ms} waits ms milliseconds, as an I/O-bound lookup would, and returns
//     "looked up in {ms} ms": the example of a tool that declares parallel, so that a batch
//     of several lookups runs them at once.
//   - fail {message} fails with the execution error message.
//   - delegate {task, ms} returns "delegated: {task}" after ms milliseconds.
//   - progress {steps, ms} reports progress i of steps (message "step i of steps") every ms
//     milliseconds, then returns "done after {steps} steps": the example of a long tool
//     that says how far it is.
//   - ran returns "ran {tool_id}", the configured id it was called as (ask_me, later and
//     forbidden all map to it with `builtin: ran`); it accepts any arguments.
//
// Every body run of every tool is also counted in the body-run ledger, by brain-exec
// itself, not by these tools.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// MaxSleepMS bounds the ms argument of slow, lookup and delegate (one hour).
const MaxSleepMS = 3_600_000

// EchoArgs are the arguments of echo.
type EchoArgs struct {
	Text string `json:"text" desc:"The text to return."`
}

// CounterArgs are the arguments of counter.
type CounterArgs struct {
	Name string `json:"name" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=200" desc:"The counter to increment."`
}

// SlowArgs are the arguments of slow.
type SlowArgs struct {
	MS int `json:"ms" jsonschema:"minimum=0,maximum=3600000" desc:"How long to sleep, in milliseconds."`
	// AckCancel makes a stopped sleep return "stopped" instead of an error: a tool that
	// acknowledges the cancellation of its call with an outcome.
	AckCancel bool `json:"ack_cancel,omitempty" desc:"When stopped early (a cancel), return \"stopped\" instead of failing."`
}

// LookupArgs are the arguments of lookup.
type LookupArgs struct {
	MS int `json:"ms" jsonschema:"minimum=0,maximum=3600000" desc:"How long the lookup waits, in milliseconds."`
}

// FailArgs are the arguments of fail.
type FailArgs struct {
	Message string `json:"message" desc:"The error message to fail with."`
}

// ProgressArgs are the arguments of progress.
type ProgressArgs struct {
	Steps int `json:"steps" jsonschema:"minimum=1,maximum=10000" desc:"How many steps to report."`
	MS    int `json:"ms" jsonschema:"minimum=0,maximum=3600000" desc:"Milliseconds between two steps."`
}

// DelegateArgs are the arguments of delegate.
type DelegateArgs struct {
	Task string `json:"task" desc:"The task to delegate to a sub-agent."`
	MS   int    `json:"ms,omitempty" jsonschema:"minimum=0,maximum=3600000" desc:"How long the sub-agent takes, in milliseconds."`
}

// RanArgs are the arguments of ran: any object, ignored.
type RanArgs map[string]any

// CounterKey is the key of counter name in the counters bucket.
func CounterKey(name string) string { return "counter." + name }

// Register adds every builtin tool to r. counter keeps its counters in the counters bucket
// ([pipeline.Env.OpenCounters]), opened under ctx.
func Register(ctx context.Context, r *toolreg.Registry, env *pipeline.Env) error {
	if env == nil {
		return errors.New("builtin: the counter tool needs the pipeline's environment")
	}
	counters, err := env.OpenCounters(ctx)
	if err != nil {
		return fmt.Errorf("builtin: the counter tool: %w", err)
	}
	return errors.Join(
		toolreg.Register(r, tool.ToolFunc("echo", "Returns its `text` argument as text.",
			contracts.CapabilityReplaySafe, func(_ context.Context, a EchoArgs) (string, error) {
				return a.Text, nil
			})),
		toolreg.Register(r, tool.ToolFunc("counter", "Increments the durable counter named by `name` and returns the new value.",
			contracts.CapabilityNonRecoverable, func(ctx context.Context, a CounterArgs) (string, error) {
				n, err := execcore.Increment(ctx, counters, CounterKey(a.Name))
				if err != nil {
					return "", err
				}
				return strconv.FormatUint(n, 10), nil
			})),
		toolreg.Register(r, tool.ToolFunc("slow", "Sleeps `ms` milliseconds, then returns \"done\".",
			contracts.CapabilityReplaySafe, func(ctx context.Context, a SlowArgs) (string, error) {
				if err := sleep(ctx, a.MS); err != nil {
					if a.AckCancel && ctx.Err() != nil {
						return "stopped", nil
					}
					return "", err
				}
				return "done", nil
			})),
		toolreg.Register(r, tool.ToolFunc("lookup", "Waits `ms` milliseconds, as an I/O-bound lookup would, then returns \"looked up in {ms} ms\".",
			contracts.CapabilityReplaySafe, func(ctx context.Context, a LookupArgs) (string, error) {
				if err := sleep(ctx, a.MS); err != nil {
					return "", err
				}
				return "looked up in " + strconv.Itoa(a.MS) + " ms", nil
			})),
		toolreg.Register(r, tool.ToolFunc("fail", "Fails with an execution error carrying `message`.",
			contracts.CapabilityReplaySafe, func(_ context.Context, a FailArgs) (string, error) {
				return "", contracts.ExecutionFailed(a.Message)
			})),
		toolreg.Register(r, tool.ToolFunc("delegate", "Delegates `task` to a sub-agent; returns \"delegated: {task}\" after `ms` milliseconds.",
			contracts.CapabilityDurableRequest, func(ctx context.Context, a DelegateArgs) (string, error) {
				if err := sleep(ctx, a.MS); err != nil {
					return "", err
				}
				return "delegated: " + a.Task, nil
			})),
		toolreg.Register(r, tool.ToolFunc("progress", "Reports progress `steps` times, `ms` milliseconds apart, then returns \"done after {steps} steps\".",
			contracts.CapabilityReplaySafe, func(ctx context.Context, a ProgressArgs) (string, error) {
				for i := 1; i <= a.Steps; i++ {
					if err := sleep(ctx, a.MS); err != nil {
						return "", err
					}
					tool.ReportProgress(ctx, float64(i), float64(a.Steps), "step "+strconv.Itoa(i)+" of "+strconv.Itoa(a.Steps))
				}
				return "done after " + strconv.Itoa(a.Steps) + " steps", nil
			})),
		toolreg.Register(r, tool.ToolFunc("ran", "Returns \"ran {tool_id}\": proof that the call ran.",
			contracts.CapabilityReplaySafe, func(ctx context.Context, _ RanArgs) (string, error) {
				id := "ran"
				if inv, ok := tool.InvocationFrom(ctx); ok && inv.ToolID != "" {
					id = inv.ToolID
				}
				return "ran " + id, nil
			})),
	)
}

// sleep waits ms milliseconds or until ctx ends.
func sleep(ctx context.Context, ms int) error {
	if ms <= 0 {
		return ctx.Err()
	}
	return ctxsleep.Sleep(ctx, time.Duration(ms)*time.Millisecond)
}
