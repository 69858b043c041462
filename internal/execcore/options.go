package execcore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Defaults of [Options].
const (
	DefaultUnavailableRetries = 3
	DefaultRetryBackoff       = 50 * time.Millisecond
	DefaultMaxRetryBackoff    = 2 * time.Second
)

// Options configures an [Executor]. Service, Target, Durable and Invoker are required.
type Options struct {
	// Service names the executor: the CloudEvent source "awaken/{Service}", the fault-hook
	// service name and the log field.
	Service string
	// Target is the execution target whose requests this executor consumes.
	Target contracts.ToolExecutionTarget
	// Durable is the consumer name (a contracts.Consumer* constant).
	Durable string
	// Invoker runs tool bodies.
	Invoker Invoker
	// Ledger, when set, records every body start (see [Invocation.BeginBody]).
	Ledger Ledger
	// CancelGrace is how long a body stopped by the cancellation of its call may take to
	// return an outcome acknowledging it (default DefaultCancelGrace); past it the call
	// ends Indeterminate(cancelled_in_flight).
	CancelGrace time.Duration
	// DefaultTimeout bounds a tool whose configuration sets no timeout; 0 means none.
	DefaultTimeout time.Duration
	// ToolTimeout, when set, replaces the timeout lookup (configured Tool.Timeout, else
	// DefaultTimeout). A result of 0 means no timeout.
	ToolTimeout func(toolID string) time.Duration
	// UnavailableRetries is how many times an UnavailableBeforeDispatch failure is retried
	// locally, without counting as a replay (default DefaultUnavailableRetries; negative:
	// none).
	UnavailableRetries int
	// RetryBackoff is the delay before the first local retry, doubling up to
	// MaxRetryBackoff.
	RetryBackoff, MaxRetryBackoff time.Duration
	// ToolType, when set, gives a tool's gen_ai.tool.type on its execute_tool span
	// (telemetry.ToolTypeFunction when unset).
	ToolType func(toolID string) string
	// Delivery adjusts the pipeline's delivery ([bus.ServiceDelivery]) for the executor's
	// consumer: its workers are how many calls run at once in this process. The bus
	// heartbeats a running handler every AckWait/3, so AckWait does not bound the tool's run
	// time, and no handler timeout applies (a tool's own timeout does).
	Delivery []bus.DeliveryOption
	// Reconciler, when set, reconciles the entered never_replay calls found after a crash
	// (reconcile.go); unset, the Invoker is used if it implements [Reconciler].
	Reconciler Reconciler
	// Reconcile bounds each reconcile (defaults in [ReconcileOptions]).
	Reconcile ReconcileOptions
}

// Option adjusts [Options]; services accept them so tests and deployments can tune the
// consumer without a new configuration field.
type Option func(*Options)

// WithDelivery adds delivery options ([bus.WithAckWait], [bus.WithDelivery],
// [bus.WithWorkers]) to the executor's consumer, after the service's own.
func WithDelivery(opts ...bus.DeliveryOption) Option {
	return func(o *Options) { o.Delivery = append(o.Delivery, opts...) }
}

// WithRetryBackoff sets the first and the largest delay between local retries of an
// UnavailableBeforeDispatch failure.
func WithRetryBackoff(first, largest time.Duration) Option {
	return func(o *Options) { o.RetryBackoff, o.MaxRetryBackoff = first, largest }
}

// WithUnavailableRetries sets how many times an UnavailableBeforeDispatch failure is
// retried locally.
func WithUnavailableRetries(n int) Option { return func(o *Options) { o.UnavailableRetries = n } }

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Service == "":
		return o, errors.New("execcore: Options.Service is required")
	case o.Target == "":
		return o, errors.New("execcore: Options.Target is required")
	case o.Durable == "":
		return o, errors.New("execcore: Options.Durable is required")
	case o.Invoker == nil:
		return o, errors.New("execcore: Options.Invoker is required")
	}
	if o.UnavailableRetries == 0 {
		o.UnavailableRetries = DefaultUnavailableRetries
	}
	if o.UnavailableRetries < 0 {
		o.UnavailableRetries = 0
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.MaxRetryBackoff < o.RetryBackoff {
		o.MaxRetryBackoff = max(o.RetryBackoff, DefaultMaxRetryBackoff)
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = DefaultCancelGrace
	}
	o.Reconcile = o.Reconcile.withDefaults()
	return o, nil
}

// StartConfigured starts the executor hop o of an executor service configured by env (both
// executors start this way): the consumer's ack wait is the configuration's
// (consumers.ack_wait, as for every service), the reconcile bounds too
// (executors.reconcile), the body-run ledger the one it asks for ([ConfiguredLedger]), and
// opts are applied last, so a service's caller can still tune the consumer.
func StartConfigured(ctx context.Context, env *pipeline.Env, o Options, opts ...Option) (*Executor, error) {
	o.Delivery = append(o.Delivery, bus.WithAckWait(env.Config.Consumers.AckWait.D()))
	r := env.Config.Executors.Reconcile
	o.Reconcile = ReconcileOptions{Attempts: r.Attempts, Backoff: r.Backoff.D(), Timeout: r.Timeout.D(), Bound: r.Bound.D()}
	ledger, err := ConfiguredLedger(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Service, err)
	}
	o.Ledger = ledger
	for _, opt := range opts {
		opt(&o)
	}
	return Start(ctx, env, o)
}
