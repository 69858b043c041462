package execcore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// Reconciler finds out what happened to a call whose executor was entered and died before
// committing an outcome, so the call need not stay indeterminate. An [Invoker] that also
// implements it is used when [Options.Reconciler] is unset.
type Reconciler interface {
	// Reconciles reports whether the configured tool toolID has a reconcile function.
	Reconciles(toolID string) bool
	// Reconcile asks the tool's reconcile function about inv (its arguments and, through
	// inv.IdempotencyKey or the context's invocation, its idempotency key). ctx ends at
	// [ReconcileOptions.Timeout]; the reconcile must honour it.
	Reconcile(ctx context.Context, inv Invocation) (contracts.Reconciled, error)
}

// Defaults of [ReconcileOptions].
const (
	DefaultReconcileAttempts = 3
	DefaultReconcileBackoff  = 200 * time.Millisecond
	DefaultReconcileTimeout  = 10 * time.Second
	DefaultReconcileBound    = time.Minute
)

// ReconcileOptions bounds the reconcile of one call.
type ReconcileOptions struct {
	// Attempts is how many times the reconcile function is called while it fails or
	// answers unknown (default DefaultReconcileAttempts).
	Attempts int
	// Backoff is the delay before the second call, doubling after each (default
	// DefaultReconcileBackoff).
	Backoff time.Duration
	// Timeout bounds one call of the reconcile function (default DefaultReconcileTimeout).
	Timeout time.Duration
	// Bound is how long, from its start, a reconcile may keep the call non-terminal —
	// and so its batch unpublished — across every delivery that works on it; past it the
	// call is sealed indeterminate (default DefaultReconcileBound).
	Bound time.Duration
}

func (o ReconcileOptions) withDefaults() ReconcileOptions {
	if o.Attempts <= 0 {
		o.Attempts = DefaultReconcileAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultReconcileBackoff
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultReconcileTimeout
	}
	if o.Bound <= 0 {
		o.Bound = DefaultReconcileBound
	}
	return o
}

// WithReconcile sets the reconcile bounds.
func WithReconcile(o ReconcileOptions) Option { return func(x *Options) { x.Reconcile = o } }

// Typed failures of a reconcile function. Each counts as the answer unknown.
var (
	// ErrReconcilePanicked: the reconcile function panicked.
	ErrReconcilePanicked = errors.New("reconcile panicked")
	// ErrReconcileTimedOut: the reconcile function did not answer within its timeout.
	ErrReconcileTimedOut = errors.New("reconcile timed out")
	// ErrReconcileInvalid: the reconcile function's answer is malformed (an unknown
	// outcome, ran without an output, an output that is not a valid tool output).
	ErrReconcileInvalid = errors.New("reconcile answer invalid")
)

// ReconcileError is a failed call of a tool's reconcile function: which tool, and why
// (it wraps one of the ErrReconcile* sentinels, or the function's own error).
type ReconcileError struct {
	ToolID string
	Err    error
}

// Error names the tool and the cause.
func (e *ReconcileError) Error() string {
	return fmt.Sprintf("reconcile of tool %s: %v", e.ToolID, e.Err)
}

// Unwrap returns the cause.
func (e *ReconcileError) Unwrap() error { return e.Err }

// Reasons of the outcomes a reconcile leads to.
const (
	// ReasonReconcileUnknown is the Indeterminate reason when the reconcile could not tell.
	ReasonReconcileUnknown = ReasonOwnerLeaseExpired + "; its reconcile could not tell whether it ran"
	// ReasonReconcileBound is the Indeterminate reason when the reconcile outlasted its bound.
	ReasonReconcileBound = ReasonOwnerLeaseExpired + "; its reconcile did not end within its bound"
	// DidNotRunText is the model-visible error of a call its reconcile found not run whose
	// recovery policy allows no further attempt.
	DidNotRunText = "did not run: the executor stopped before the tool's effect, as its reconcile confirmed"
)

// reconciler returns the reconciler in force, nil when there is none.
func (x *Executor) reconciler() Reconciler {
	if x.opts.Reconciler != nil {
		return x.opts.Reconciler
	}
	r, _ := x.opts.Invoker.(Reconciler)
	return r
}

// reconciles reports whether a crash of toolID's entered call is reconciled.
func (x *Executor) reconciles(toolID string) bool {
	r := x.reconciler()
	return r != nil && r.Reconciles(toolID)
}

// recoverByReconcile is enter's recovery of a never_replay call entered by seq whose tool
// has a reconcile function: it begins the reconcile (actReconcile, one write: the marker
// that keeps the call non-terminal), continues one in progress (a delivery that died
// while reconciling), or seals the call indeterminate once the reconcile outlasted its
// bound (actSettled).
func (x *Executor) recoverByReconcile(cur *contracts.CallRecord, seq uint64, now time.Time) (action, error) {
	in, ok := cur.Reconciling()
	if !ok {
		if err := cur.BeginReconcile(seq, now); err != nil {
			return 0, err
		}
		return actReconcile, nil
	}
	if now.Sub(in.StartedAt) < x.opts.Reconcile.Bound {
		return actReconcile, state.ErrNoChange
	}
	if err := cur.EndReconcile(contracts.ReconcileUnknown, in.Calls, "bound exceeded", now, func() error {
		return cur.MarkIndeterminate(ReasonReconcileBound, now)
	}); err != nil {
		return 0, err
	}
	return actSettled, nil
}

// reconcileAnswer is what the reconcile of a call answered ([Executor.askReconcile]): the
// outcome, how many calls of the function it took and the last failure's text, for the
// reconcile in progress that started at started on attempt.
type reconcileAnswer struct {
	res     contracts.Reconciled
	calls   int
	failure string
	started time.Time
	attempt uint16
}

// askReconcile runs the reconcile of c's call, entered by c's delivery, when [Executor.enter]
// left it to reconcile (the record c.rec as committed or read): it asks the tool's
// reconcile function ([Executor.askReconciler]) and keeps the answer for
// [Executor.commitReconcile]. It reports reaching the in-reconcile point once the reconcile
// answered. A record no longer reconciling is another delivery's (a duplicate).
func (x *Executor) askReconcile(ctx context.Context, c *callRun) (bool, error) {
	if c.act != actReconcile {
		return false, nil
	}
	in, ok := c.rec.Reconciling()
	if !ok {
		c.act = actDuplicate
		c.untrack()
		return false, nil
	}
	req := c.req
	a := &reconcileAnswer{started: in.StartedAt, attempt: c.rec.Phase.Attempt}
	inv := Invocation{
		RunID: req.RunID, Step: req.Step, Index: req.Index, CallID: req.CallID,
		OperationID: c.op, ToolID: req.ToolID, Arguments: req.Arguments, Attempt: a.attempt,
	}
	a.res, a.calls, a.failure = x.askReconciler(ctx, inv, a.started.Add(x.opts.Reconcile.Bound))
	if err := ctx.Err(); err != nil {
		// The executor is stopping: what the reconcile could not finish is not an
		// answer. The reconcile stays in progress for the redelivery (within its bound).
		c.untrack()
		return false, fmt.Errorf("%s: reconcile interrupted: %w", x.opts.Service, err)
	}
	c.reconcile = a
	return true, nil
}

// commitReconcile commits what c's reconcile answered by compare-and-swap — only while
// this delivery still owns the reconcile in progress, so of two deliveries (or replicas)
// reconciling the same call, one outcome is committed and the other finds it. It leaves in
// c what the request leads to next: actSettled (Completed or Indeterminate committed: it
// reports committed), actInvoke (not_run and the policy allows another attempt:
// Executing{n+1}, entered by this delivery, a write that hands nothing on), or the action
// of a record found moved (actRepublish for a terminal one, actDuplicate otherwise). The
// body's tracking ends here when no body can follow, before the fault point.
func (x *Executor) commitReconcile(ctx context.Context, c *callRun) (bool, error) {
	a := c.reconcile
	if a == nil {
		return false, nil
	}
	act, rec, rev, err := x.commitReconciled(ctx, c, a)
	if err != nil {
		c.untrack()
		return false, err
	}
	c.act, c.rec, c.rev = act, rec, rev
	if act != actInvoke {
		c.untrack()
	}
	return act == actSettled, nil
}

// commitReconciled is [Executor.commitReconcile]'s write.
func (x *Executor) commitReconciled(ctx context.Context, c *callRun, a *reconcileAnswer) (action, contracts.CallRecord, uint64, error) {
	log := zerolog.Ctx(ctx)
	req, res, attempt, seq := c.req, a.res, a.attempt, c.seq
	var out contracts.ToolOutput
	if res.Outcome == contracts.ReconcileRan {
		var size int
		out, size = finishOutput(req.CallID, *res.Output, MaxOutputBytes)
		var err error
		if out, err = x.byReference(ctx, c.op, out, size); err != nil {
			return 0, c.rec, 0, err
		}
	}
	act, wrote := actSettled, false
	committed, rev, err := x.env.Calls.Update(ctx, c.key, func(cur *contracts.CallRecord, exists bool) error {
		act, wrote = actSettled, false
		if !exists {
			return errNotOwned
		}
		if in, ok := cur.Reconciling(); !ok || !cur.HeldBy(attempt, seq) || !in.StartedAt.Equal(a.started) {
			return errNotOwned
		}
		now := x.env.Now()
		err := cur.EndReconcile(res.Outcome, a.calls, a.failure, now, func() error {
			switch res.Outcome {
			case contracts.ReconcileRan:
				return cur.Complete(out, now)
			case contracts.ReconcileNotRun:
				// The effect did not happen, so running the body now is its first run, not
				// a replay: the attempt budget alone decides.
				err := cur.Retry(seq, now)
				if errors.Is(err, contracts.ErrAttemptsExhausted) {
					return cur.Complete(contracts.ExecutionFailed(DidNotRunText).Output(req.CallID), now)
				}
				if err == nil {
					act = actInvoke
				}
				return err
			default:
				return cur.MarkIndeterminate(ReasonReconcileUnknown, now)
			}
		})
		wrote = err == nil
		return err
	})
	if err != nil {
		if errors.Is(err, contracts.ErrInvalidPersistedState) {
			return 0, committed, 0, bus.Permanent(err)
		}
		return 0, committed, 0, err
	}
	if !wrote {
		// Not this delivery's write: the record moved (another delivery reconciled it, or
		// the bound sealed it) and keeps what it has.
		if committed.Phase.IsTerminal() {
			return actRepublish, committed, rev, nil
		}
		return actDuplicate, committed, rev, nil
	}
	ev := log.Info().Str("reconcile", string(res.Outcome)).Int("reconcile_calls", a.calls)
	if a.failure != "" {
		ev = log.Warn().Str("reconcile", string(res.Outcome)).Int("reconcile_calls", a.calls).Str("reconcile_error", a.failure)
	}
	ev.Str("phase", string(committed.Phase.Kind)).Msg("entered call reconciled after a crash")
	if committed.Phase.Kind == contracts.PhaseIndeterminate {
		x.env.Telemetry.Indeterminate(telemetry.ReasonOwnerLeaseExpired)
	}
	return act, committed, rev, nil
}

// askReconciler calls the reconcile function until it answers ran or not_run, at most
// Attempts times with doubling back-off, never past deadline. A failure (error, panic,
// timeout, malformed answer) counts as unknown. It returns the answer, the number of calls
// and the last failure's text.
func (x *Executor) askReconciler(ctx context.Context, inv Invocation, deadline time.Time) (contracts.Reconciled, int, string) {
	r := x.reconciler()
	o := x.opts.Reconcile
	var failure string
	wait := o.Backoff
	calls := 0
	for calls < o.Attempts {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		calls++
		res, err := reconcileOnce(ctx, r, inv, min(o.Timeout, left))
		if err == nil && res.Outcome != contracts.ReconcileUnknown {
			return res, calls, failure
		}
		if err != nil {
			failure = truncate(err.Error(), 512)
			zerolog.Ctx(ctx).Warn().Err(err).Int("reconcile_call", calls).Msg("reconcile failed; counts as unknown")
		} else {
			failure = ""
		}
		if calls == o.Attempts {
			break
		}
		_ = ctxsleep.Sleep(ctx, min(wait, max(time.Until(deadline), 0)))
		wait *= 2
	}
	return contracts.Unknown(), calls, failure
}

// reconcileOnce calls r once under timeout. The function runs on its own goroutine, so a
// reconcile that ignores its context cannot hold the delivery past its timeout (it is
// abandoned, its answer discarded); a panic is recovered. Both are *ReconcileError.
func reconcileOnce(ctx context.Context, r Reconciler, inv Invocation, timeout time.Duration) (contracts.Reconciled, error) {
	ctx, cancel := context.WithTimeoutCause(tool.WithInvocation(ctx, inv), timeout, ErrReconcileTimedOut)
	defer cancel()
	type answer struct {
		res contracts.Reconciled
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{err: fmt.Errorf("%w: %v", ErrReconcilePanicked, p)}
			}
		}()
		res, err := r.Reconcile(ctx, inv)
		done <- answer{res, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		a.err = context.Cause(ctx)
	}
	if a.err == nil && ctx.Err() != nil {
		a.err = context.Cause(ctx) // answered, but only after its time was up
	}
	if a.err == nil {
		if err := a.res.Validate(); err != nil {
			a.err = fmt.Errorf("%w: %w", ErrReconcileInvalid, err)
		} else if a.res.Outcome == contracts.ReconcileRan {
			out := *a.res.Output
			out.CallID = inv.CallID
			if err := out.Normalize().Validate(); err != nil {
				a.err = fmt.Errorf("%w: output: %w", ErrReconcileInvalid, err)
			}
		}
	}
	if a.err != nil {
		return contracts.Unknown(), &ReconcileError{ToolID: inv.ToolID, Err: a.err}
	}
	return a.res, nil
}

// ReconcileAuditID is the ce-id (and Nats-Msg-Id) of the audit record of the reconcile of
// attempt of operation op: a re-announcement publishes it again under the same id.
func ReconcileAuditID(op string, attempt uint16) string {
	return fmt.Sprintf("%s:reconcile:%d", op, attempt)
}

// auditReconciles publishes the audit record of every ended reconcile of the terminal call
// rec on the run's reconcile audit subject, before the call's output is acknowledged: a
// failed publish fails the delivery, and its redelivery, which finds the call terminal,
// publishes again under the same ids (deduplicated by the stream). A call never
// reconciled publishes nothing.
func (x *Executor) auditReconciles(ctx context.Context, req contracts.ExecRequest, rec contracts.CallRecord, op string) error {
	for _, r := range rec.Reconciles {
		if r.Outcome == "" || r.EndedAt == nil {
			continue
		}
		a := contracts.ReconcileAudit{
			RunID: req.RunID, BatchID: contracts.BatchID(req.RunID, req.Step), CallID: req.CallID, ToolID: req.ToolID,
			Attempt: r.Attempt, Outcome: r.Outcome, Phase: r.Phase, Calls: r.Calls, Error: r.Error,
			StartedAt: r.StartedAt, EndedAt: *r.EndedAt,
		}
		ev, err := x.env.Event(x.opts.Service, ReconcileAuditID(op, r.Attempt), contracts.TypeReconcileAudit, a)
		if err != nil {
			return err
		}
		if _, err := x.env.Pub.Publish(ctx, x.env.Names.ReconcileAuditSubject(req.RunID), ev); err != nil {
			return fmt.Errorf("%s: reconcile audit: %w", x.opts.Service, err)
		}
	}
	return nil
}
