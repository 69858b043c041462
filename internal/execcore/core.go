package execcore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/toolctx"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// MaxOutputBytes caps the JSON size of one output (64 MiB, [contracts.MaxOutputBytes]). A
// larger output is replaced by the execution error "output exceeds 67108864 bytes". An
// output over the inline limit (executors.inline_output_bytes) is stored by reference
// (see objects.go), so call records and results stay small.
const MaxOutputBytes = contracts.MaxOutputBytes

// Reasons of the Indeterminate outcomes decided by the executor. They reach the model as
// "tool outcome is indeterminate: {reason}".
const (
	// ReasonOwnerLeaseExpired: a never_replay call's executor was entered and its handler
	// died (or lost its message) before committing an outcome.
	ReasonOwnerLeaseExpired = "owner lease expired after the executor was entered"
	// ReasonAttemptsExhausted: a replayable call crashed on its last allowed attempt.
	ReasonAttemptsExhausted = "recovery attempt budget exhausted"
)

// Executor consumes the executor requests of one target and runs them exactly as the
// package documentation describes. It is safe for concurrent use; every method of it may
// run on several workers at once, and several Executors (in one or many processes) may
// share the durable consumer.
type Executor struct {
	env  *pipeline.Env
	opts Options
	// consumers is the loop of its one consumer, the target's executor requests.
	consumers *bus.Consumers
	// cancels tracks the calls in flight; stopSub hears the gate's stop notices, which
	// stop the bodies of a cancelled run's calls or of one cancelled call (cancel.go).
	cancels runCancels
	stopSub *nats.Subscription
	// objects stores outputs too large to carry inline (objects.go).
	objects objectStore
}

// New builds an Executor without consuming; [Executor.Handle] can then be driven directly.
// Most callers want [Start].
func New(env *pipeline.Env, opts Options) (*Executor, error) {
	if env == nil {
		return nil, errors.New("execcore: nil environment")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if env.Service == "" {
		// The source of the call-record revisions it writes; internal/wiring/app names the
		// service already, an embedding (pkg/executor, tests) may not.
		env.Service = opts.Service
	}
	return &Executor{env: env, opts: opts}, nil
}

// Start builds an Executor, ensures its durable consumer on the calls bucket's stream
// (filter Names.TargetCallRecordsFilter(Target): the gate's revisions that hand a call of this
// target to its executor) and starts consuming. ctx is the hard-stop context:
// cancelling it aborts running tools (their calls then recover by policy on redelivery);
// [Executor.Stop] is the graceful way down.
func Start(ctx context.Context, env *pipeline.Env, opts Options) (*Executor, error) {
	x, err := New(env, opts)
	if err != nil {
		return nil, err
	}
	// The executors' delivery: the pipeline's, with no handler deadline (the tools are
	// bounded by their own timeouts instead; see [bus.ConsumerSpec.HandlerTimeout]).
	delivery := bus.ServiceDelivery().With(x.opts.Delivery...)
	delivery.Names, delivery.Observer = env.Names, env.Telemetry.Observer()
	// One durable on each partition's call records.
	consumers, err := bus.Start(ctx, env.JS, delivery, bus.PerPartition(env.Names, func(pn contracts.Names) bus.Route {
		return bus.Route{Spec: bus.ConsumerSpec{
			Stream:         pn.CallRecordsStream(),
			Durable:        x.opts.Durable,
			FilterSubjects: []string{pn.TargetCallRecordsFilter(x.opts.Target)},
			Records:        true,
			AcceptTypes:    []string{contracts.TypeExecRequest},
			OnExhausted:    x.onExhausted,
		}, Handler: env.Handle(x.opts.Service, x.handle)}
	}), env.Log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", x.opts.Service, err)
	}
	x.consumers = consumers
	if err := x.listenForCallStops(); err != nil {
		return nil, errors.Join(err, x.Stop(context.WithoutCancel(ctx)))
	}
	return x, nil
}

// Stop stops pulling requests, lets the calls in flight finish and settle, and returns —
// or returns an error when ctx ends first (the calls keep running under the hard-stop
// context). It is idempotent.
func (x *Executor) Stop(ctx context.Context) error {
	if x.consumers == nil {
		return nil
	}
	err := x.consumers.Stop(ctx)
	if x.stopSub != nil {
		// After the drain: a stop notice still reaches the calls that finished draining.
		_ = x.stopSub.Unsubscribe()
	}
	return err
}

// Options returns the effective options (defaults applied).
func (x *Executor) Options() Options { return x.opts }

// errCallNotVisible: an executor request's call record does not show the Executing phase
// the gate wrote before publishing the request — the read is behind that write.
var errCallNotVisible = errors.New("not visible as executing yet")

// action is what a request leads to once the call record has been read (and possibly
// moved).
type action int

const (
	actStale     action = iota // no Executing record: nothing to do
	actUnseen                  // no record, or one before Executing: the read is behind the gate's write
	actDuplicate               // entered by another request message: its delivery owns the call
	actRepublish               // already terminal: announce it again
	actSettled                 // recovery committed a terminal outcome: announce it
	actInvoke                  // this delivery owns attempt `attempt`: run the body
	actReconcile               // an entered never_replay call with a reconcile function: reconcile it (reconcile.go)
)

// Handle is the consume loop's handler of one executor request: the effects runtime's
// handler of [Executor.handle], as [Start] routes the requests to it (a test may drive it
// directly). It returns nil only when the call's outcome is committed and announced (or
// there is nothing to do); any error leaves the message to be redelivered, which is safe
// in every state (see the package documentation).
func (x *Executor) Handle(ctx context.Context, d bus.Delivery) error {
	return x.env.Handle(x.opts.Service, x.handle)(ctx, d)
}

// callRun is what the steps of one executor request ([Executor.handle]) pass to each other.
type callRun struct {
	req contracts.ExecRequest
	key string
	op  string
	// seq is the request's stream sequence, the EnteredBy of the delivery that enters the
	// call; delivered the request's delivery count.
	seq, delivered uint64

	// runCtx is the context the body runs under: tracked from before the call is entered,
	// so the stop notice of its run or of the call finds it; untrack ends the tracking (and
	// may be called again). Every step that ends the operation — by an error of its own, by
	// settling it, or once no body can follow, before its fault point — untracks; only a
	// fault hook's abort at in-reconcile (test machinery: the process counts as dead there)
	// leaves the entry, which stops nothing but a context no body runs under.
	runCtx  context.Context
	untrack func()

	// act is what the request leads to, rec the call record as committed or found, rev its
	// revision.
	act action
	rec contracts.CallRecord
	rev uint64
	// reconcile is the answer of the call's reconcile, when it is reconciled.
	reconcile *reconcileAnswer

	// The attempt the body ran, whether this delivery entered it, and what it returned:
	// ran is set when the body returned an output to complete the call with.
	attempt uint16
	marked  bool
	ran     bool
	out     contracts.ToolOutput
	cost    *float64
	// owned: the completion was this delivery's (it still owned the attempt).
	owned bool
}

// handle is the handler of one executor request: it reads the request from the revision
// (a revision that names no call of this target is a [*contracts.Rejection]) and returns
// the operation of its call, which every delivery of the request runs from the start:
//
//   - enter the call (one compare-and-swap, [Executor.enter]): this delivery's claim of
//     the attempt (the Entered mark, or a recovery's next attempt: a plain write), or the
//     outcome a recovery commits for a call found entered by a delivery that died — that
//     terminal revision is the call's output, the barrier's work;
//   - for a never_replay call with a reconcile function, ask the reconcile (the in-reconcile
//     point) and commit what it answered ([Executor.askReconcile],
//     [Executor.commitReconcile]): an outcome, the barrier's work, or the next attempt;
//   - run the body of the attempt this delivery owns ([Executor.runBody]; the in-tool point
//     is inside it), and commit Completed with its output ([Executor.completeCall]): the
//     barrier's work. A body stopped by its run's or its call's cancellation seals the call
//     instead;
//   - announce the terminal call ([Executor.announce]): its revision is the output, so
//     this only audits a reconcile's answer.
//
// A request found stale or a duplicate, or a call that another delivery or a cancel moved
// while the body ran, settles the operation: the delivery is acknowledged.
func (x *Executor) handle(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	req, key, err := x.request(d)
	if err != nil {
		return pipeline.Effects{}, err // a *contracts.Rejection: dead-lettered, it names no call we could finish
	}
	if d.StreamSeq == 0 {
		return pipeline.Effects{}, errors.New("execcore: delivery has no stream sequence; cannot claim the call")
	}
	c := &callRun{req: req, key: key, op: contracts.OperationID(req.RunID, req.Step, req.CallID),
		seq: d.StreamSeq, delivered: d.NumDelivered}
	log := zerolog.Ctx(ctx).With().
		Str("batch_id", contracts.BatchID(req.RunID, req.Step)).
		Str("run_id", req.RunID).Str("call_id", req.CallID).Str("tool_id", req.ToolID).
		Uint64("stream_seq", d.StreamSeq).Logger()
	return pipeline.Effects{Op: c.op, Log: &log, Steps: []pipeline.Effect{
		// Tracked before the call is entered: a cancellation that arrives once the Entered
		// mark is visible (to the gate, the api or a test) must find the body's context, or
		// the body runs to its end (a 30 s tool, 30 s) after its run was cancelled.
		pipeline.Do(func(ctx context.Context) error {
			c.runCtx, c.untrack = x.cancels.track(ctx, req.RunID, c.op)
			return nil
		}),
		pipeline.Commit(func(ctx context.Context) (bool, error) { return x.enterCall(ctx, c) }, pipeline.ToBarrier),
		pipeline.Step(pipeline.FaultInReconcile, func(ctx context.Context) (bool, error) { return x.askReconcile(ctx, c) }),
		pipeline.Commit(func(ctx context.Context) (bool, error) { return x.commitReconcile(ctx, c) }, pipeline.ToBarrier),
		pipeline.Do(func(ctx context.Context) error { return x.runBody(ctx, c) }),
		pipeline.Commit(func(ctx context.Context) (bool, error) { return x.completeCall(ctx, c) }, pipeline.ToBarrier),
		pipeline.Publish(func(ctx context.Context) error {
			if err := c.keepFound(ctx); err != nil {
				return err
			}
			return x.announce(ctx, c.req, c.rec, c.op)
		}),
	}}, nil
}

// enterCall enters c's call ([Executor.enter]). It reports committed only when the write
// is a recovery's outcome (a terminal record): the Entered mark, a recovery's next attempt
// and a reconcile's marker hand nothing on and reach no fault point. The body's tracking
// ends here when no body can follow, before the fault point.
func (x *Executor) enterCall(ctx context.Context, c *callRun) (bool, error) {
	var err error
	c.act, c.rec, c.rev, err = x.enter(ctx, c.key, c.req, c.seq, c.delivered)
	if err != nil || (c.act != actInvoke && c.act != actReconcile) {
		c.untrack()
	}
	return c.act == actSettled, err
}

// runBody runs the body of the attempt c's delivery owns, when the call was entered (or
// recovered into a new attempt) for it; the actions that run no body end here, or go on
// to the announcement of a terminal call. A body stopped by its run's cancellation or its
// call's seals the call ([Executor.sealCancelled], [Executor.endCallCancelled]) — a write
// with no fault point of its own — and goes on to its announcement once terminal.
// Otherwise what the body returned, finished and stored by reference if large, is left
// for [Executor.completeCall].
func (x *Executor) runBody(ctx context.Context, c *callRun) error {
	defer c.untrack()
	log := zerolog.Ctx(ctx)
	switch c.act {
	case actStale:
		log.Debug().Msg("executor request is stale (call not executing); ignored")
		return pipeline.ErrSettled
	case actUnseen:
		return fmt.Errorf("%s: call %s is %w (found %q)", x.opts.Service, c.key, errCallNotVisible, c.rec.Phase.Kind)
	case actDuplicate:
		log.Info().Uint64("entered_by", c.rec.EnteredBy).Msg("duplicate executor request; the entering delivery owns the call")
		return pipeline.ErrSettled
	case actRepublish:
		log.Debug().Str("phase", string(c.rec.Phase.Kind)).Msg("call already terminal; re-announcing its output")
		return nil
	case actSettled:
		log.Warn().Str("phase", string(c.rec.Phase.Kind)).Str("reason", c.rec.Phase.Reason).Msg("call found entered after a crash; recovery settled it")
		return nil
	}

	req := c.req
	c.attempt = c.rec.Phase.Attempt
	// marked: this delivery committed Entered; otherwise it runs an unmarked first attempt
	// of a replay_safe call (see [runsUnmarked]).
	c.marked = c.rec.Entered
	inv := Invocation{
		RunID: req.RunID, Step: req.Step, Index: req.Index, CallID: req.CallID,
		OperationID: c.op, ToolID: req.ToolID, Arguments: req.Arguments, Attempt: c.attempt,
	}
	log.Debug().Uint16("attempt", c.attempt).Msg("executor entered")
	spanCtx, endSpan := x.toolSpan(c.runCtx, req, inv)
	if ledger := x.opts.Ledger; ledger != nil {
		// inv.BeginBody finds the ledger in the body's context: the public Invocation is
		// plain data, so only the core can make a body start count.
		spanCtx = toolctx.WithBodyStart(spanCtx, func(ctx context.Context) error { return ledger.BodyStarting(ctx, inv) })
	}
	bodyCtx, endProgress := x.withProgress(spanCtx, inv)
	// The last cost the body reported for its call ([tool.ReportCost]), set from its goroutines.
	var cost atomic.Pointer[float64]
	bodyCtx = toolctx.WithCost(bodyCtx, func(amount float64) { cost.Store(&amount) })
	out, err := x.runUnlessPaused(bodyCtx, inv)
	endProgress()
	stopped := ctx.Err() == nil && errors.Is(context.Cause(c.runCtx), errRunCancelled)
	var callStop *callCancelled
	callStopped := ctx.Err() == nil && errors.As(context.Cause(c.runCtx), &callStop)
	endSpan(out, err, stopped || callStopped && err != nil)
	c.untrack()
	if stopped {
		return x.sealCancelled(ctx, c)
	}
	if callStopped {
		return x.endCallCancelled(ctx, c, callStop.cc, out, err)
	}
	if err != nil {
		return err
	}
	out, size := finishOutput(req.CallID, out, MaxOutputBytes)
	if out, err = x.byReference(ctx, c.op, out, size); err != nil {
		return err
	}
	c.ran, c.out, c.cost = true, out, cost.Load()
	return nil
}

// completeCall commits Completed with the output of the body c ran ([Executor.complete]),
// when it ran one. It reports committed when the completion was this delivery's.
func (x *Executor) completeCall(ctx context.Context, c *callRun) (bool, error) {
	if !c.ran {
		return false, nil
	}
	var err error
	c.rec, c.owned, err = x.complete(ctx, c.key, c.req, c.seq, c.attempt, c.marked, c.out, c.cost, c.rec, c.rev)
	return c.owned, err
}

// keepFound settles the operation when the call moved while its body ran and is not
// terminal (another delivery owns it: the body's output is discarded), and logs a call
// found terminal, whose outcome is kept and announced.
func (c *callRun) keepFound(ctx context.Context) error {
	if !c.ran || c.owned {
		return nil
	}
	log := zerolog.Ctx(ctx)
	if !c.rec.Phase.IsTerminal() {
		log.Warn().Uint16("attempt", c.attempt).Str("phase", string(c.rec.Phase.Kind)).Uint16("record_attempt", c.rec.Phase.Attempt).
			Msg("lost ownership of the call while the tool ran; its output is discarded")
		return pipeline.ErrSettled
	}
	log.Info().Str("phase", string(c.rec.Phase.Kind)).Msg("call became terminal while the tool ran; keeping that outcome")
	return nil
}

// announce finishes a call found or made terminal. Its terminal call-record revision is
// the output announcement (pipeline: the record is the work): the publisher and the
// gate consume it from the calls bucket's stream, so nothing is published here — a
// redelivery that finds the call terminal has nothing to repeat — but the audit of the
// call's reconciles ([Executor.auditReconciles]). It is the publish step of the call's
// operation, before the after-publish point, the boundary between the durable outcome
// and the ack.
func (x *Executor) announce(ctx context.Context, req contracts.ExecRequest, rec contracts.CallRecord, op string) error {
	if err := x.auditReconciles(ctx, req, rec, op); err != nil {
		return err
	}
	zerolog.Ctx(ctx).Debug().Str("outcome", string(rec.Outcome())).Msg("call output committed")
	return nil
}

// runsUnmarked reports whether cur's attempt may run without committing Entered first, on
// the first delivery of its request: only a replay_safe call (repeating its body is as
// good as running it once) whose policy allows a replay. Its outcome is then committed in
// one write (Executing → Completed) instead of two. A crash meanwhile leaves the call
// Executing and not entered, and the redelivery, which cannot tell whether the body ran,
// recovers it as if it had been entered ([Executor.enter]), so the crash counts as an
// attempt and the budget still bounds the body runs. What the marker no longer stops is a
// second request message for the same call (the gate re-publishing it past the
// deduplication window while the body runs): it runs the body too, which the replay_safe
// policy allows, and the first outcome committed is kept.
func runsUnmarked(cur *contracts.CallRecord) bool {
	return cur.Policy.Mode == contracts.ModeReplaySafe && cur.Policy.MaxAttempts >= 2
}

// holds reports whether delivery seq still owns attempt of the call: it committed Entered
// for it (marked), or it runs the attempt unmarked and nobody has entered or moved it since.
func holds(cur *contracts.CallRecord, attempt uint16, seq uint64, marked bool) bool {
	if marked {
		return cur.HeldBy(attempt, seq)
	}
	return cur.ExecutingUnentered() && cur.Phase.Attempt == attempt
}

// enter reads the call record and, by compare-and-swap, claims it for this delivery or
// applies recovery. It returns what to do and the record as committed (or as read), with
// its revision. delivered is the delivery count of the request message.
func (x *Executor) enter(ctx context.Context, key string, req contracts.ExecRequest, seq, delivered uint64) (action, contracts.CallRecord, uint64, error) {
	var act action
	rec, rev, err := x.env.Calls.Update(ctx, key, func(cur *contracts.CallRecord, exists bool) error {
		act = actStale
		// The gate makes a call Executing before it publishes its request, and a call
		// never leaves Executing except to a terminal phase. No record, or one still
		// Requested or Awaiting, is therefore a read answered by a replica of the calls
		// bucket that has not applied the gate's write yet (any replica answers a read).
		// Acknowledging the request then would leave the call Executing and never run,
		// and its batch never published: it is retried instead, and dead-lettered by the
		// exhaustion hook only if the record never shows up.
		if !exists || cur.Phase.Kind == contracts.PhaseRequested || cur.Phase.Kind == contracts.PhaseAwaiting {
			act = actUnseen
			return state.ErrNoChange
		}
		// A record written without a recovery policy takes the request's copy of it.
		cur.AdoptPolicy(req.Policy)
		switch {
		case cur.Phase.IsTerminal():
			act = actRepublish
			return state.ErrNoChange
		case cur.Phase.Kind != contracts.PhaseExecuting:
			return state.ErrNoChange
		case !cur.Entered && runsUnmarked(cur) && delivered <= 1:
			act = actInvoke
			return state.ErrNoChange // Completed will be the one write of this attempt
		case !cur.Entered && runsUnmarked(cur):
			// A redelivery: an earlier delivery of this message may have run the body
			// unmarked and died. Recover as if it had entered (below), so the replay
			// counts as an attempt.
			if err := cur.Enter(seq, x.env.Now()); err != nil {
				return err
			}
		case !cur.Entered:
			if err := cur.Enter(seq, x.env.Now()); err != nil {
				return err
			}
			act = actInvoke
			return nil
		case cur.EnteredBy != seq:
			act = actDuplicate
			return state.ErrNoChange
		}
		// This very message entered the call and its handler did not finish: recover.
		now := x.env.Now()
		if cur.Policy.Mode == contracts.ModeNeverReplay && x.reconciles(cur.ToolID) {
			var err error
			act, err = x.recoverByReconcile(cur, seq, now)
			return err
		}
		if cur.Policy.Mode == contracts.ModeNeverReplay {
			if err := cur.MarkIndeterminate(ReasonOwnerLeaseExpired, now); err != nil {
				return err
			}
			act = actSettled
			return nil
		}
		if mismatch := x.replayCheck(req, cur.ToolID, cur.Policy); mismatch != nil {
			if err := cur.MarkIndeterminate(mismatch.Error(), now); err != nil {
				return err
			}
			act = actSettled
			return nil
		}
		err := cur.Retry(seq, now)
		if errors.Is(err, contracts.ErrAttemptsExhausted) {
			if err := cur.MarkIndeterminate(ReasonAttemptsExhausted, now); err != nil {
				return err
			}
			act = actSettled
			return nil
		}
		if err != nil {
			return err
		}
		act = actInvoke
		return nil
	})
	if err != nil {
		if errors.Is(err, contracts.ErrInvalidPersistedState) {
			// A record no transition accepts cannot be fixed by redelivery.
			return 0, rec, 0, bus.Permanent(err)
		}
		return 0, rec, 0, err
	}
	if act == actSettled {
		// Counted once: only the delivery whose write made the call indeterminate gets here.
		reason := telemetry.ReasonOwnerLeaseExpired
		switch {
		case rec.Phase.Reason == ReasonAttemptsExhausted:
			reason = telemetry.ReasonAttemptsExhausted
		case strings.HasPrefix(rec.Phase.Reason, ReasonCapabilityPrefix):
			reason = telemetry.ReasonCapabilityMismatch
		}
		x.env.Telemetry.Indeterminate(reason)
	}
	return act, rec, rev, nil
}

// complete commits Completed(out) if this delivery still owns the attempt it ran (see
// [holds]). owned is false when the record moved meanwhile (cancelled, or recovered by a
// redelivery after a lost heartbeat); rec is then the record as found. entered and rev are
// the record this delivery committed on entry (or read, for an unmarked run): the common
// case is a single compare-and-swap at rev, and only a conflict pays for a re-read.
func (x *Executor) complete(ctx context.Context, key string, req contracts.ExecRequest, seq uint64, attempt uint16, marked bool,
	out contracts.ToolOutput, cost *float64, entered contracts.CallRecord, rev uint64) (rec contracts.CallRecord, owned bool, err error) {
	apply := func(cur *contracts.CallRecord) (bool, error) {
		if !holds(cur, attempt, seq, marked) {
			return false, nil
		}
		cur.AdoptPolicy(req.Policy)
		if err := cur.Complete(out, x.env.Now()); err != nil {
			return false, err
		}
		// What the tool reported its call cost goes on the record with the output, in the
		// same write: the gate settles the call's budget shares to it (limits).
		if err := cur.ChargeCost(cost); err != nil {
			return false, err
		}
		return true, nil
	}
	next := entered.Clone()
	if ok, err := apply(&next); err == nil && ok {
		if _, err := x.env.Calls.UpdateAt(ctx, key, next, rev); err == nil {
			return next, true, nil
		} else if !errors.Is(err, state.ErrConflict) {
			return entered, false, err
		}
	}
	rec, _, err = x.env.Calls.Update(ctx, key, func(cur *contracts.CallRecord, exists bool) error {
		owned = false
		if !exists {
			return errNotOwned
		}
		ok, err := apply(cur)
		if err != nil {
			return err
		}
		if !ok {
			return errNotOwned
		}
		owned = true
		return nil
	})
	if err != nil && errors.Is(err, contracts.ErrInvalidPersistedState) {
		err = bus.Permanent(err)
	}
	return rec, owned, err
}

// errNotOwned is how complete's and seal's compare-and-swap callbacks report a record this
// delivery does not own (no record, or one another delivery, a cancel or the gate moved).
// The record was read from any replica of the calls bucket, possibly one behind this
// delivery's own entry, so the verdict is confirmed on the stream leader's record
// (state.ErrNoChangeOnLeader): a lagging replica cannot make a finished body's output be
// dropped, or a seal be skipped.
var errNotOwned = fmt.Errorf("the call record is not this delivery's: %w", state.ErrNoChangeOnLeader)

// onExhausted runs when a request failed transiently on its last allowed delivery: the
// call becomes Indeterminate (unless another delivery owns it or it is already terminal)
// and its output is announced, so the batch still finishes. The seal is a write with no
// fault point of its own; the announcement is the publish step of the call's operation.
func (x *Executor) onExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	req, key, err := x.request(d)
	if err != nil {
		return nil // nothing identifies a call; the message is dead-lettered as is
	}
	op := contracts.OperationID(req.RunID, req.Step, req.CallID)
	reason := truncate(fmt.Sprintf("%s gave up after %d deliveries: %v", x.opts.Service, d.NumDelivered, cause), 512)
	var rec contracts.CallRecord
	return x.env.Apply(ctx, x.opts.Service, pipeline.Effects{Op: op, Steps: []pipeline.Effect{
		pipeline.Do(func(ctx context.Context) error {
			var err error
			rec, err = x.seal(ctx, key, req, reason, telemetry.ReasonDeliveryExhausted, func(cur *contracts.CallRecord) bool {
				return cur.Phase.Kind == contracts.PhaseExecuting && (!cur.Entered || cur.EnteredBy == d.StreamSeq)
			})
			if err != nil {
				return err
			}
			if !rec.Phase.IsTerminal() {
				return pipeline.ErrSettled
			}
			zerolog.Ctx(ctx).Error().Str("call_id", req.CallID).Str("run_id", req.RunID).Str("reason", reason).
				Msg("executor request exhausted; call is indeterminate")
			return nil
		}),
		pipeline.Publish(func(ctx context.Context) error { return x.announce(ctx, req, rec, op) }),
	}})
}

// seal makes the call of key Indeterminate(reason) if owns says this delivery may seal it
// (otherwise the record keeps what the gate or another delivery committed), counts the
// seal once under metric, and returns the record as committed or found.
func (x *Executor) seal(ctx context.Context, key string, req contracts.ExecRequest, reason, metric string,
	owns func(*contracts.CallRecord) bool) (contracts.CallRecord, error) {
	sealed := false
	rec, _, err := x.env.Calls.Update(ctx, key, func(cur *contracts.CallRecord, exists bool) error {
		sealed = false
		if !exists || !owns(cur) {
			return errNotOwned
		}
		cur.AdoptPolicy(req.Policy)
		if err := cur.MarkIndeterminate(reason, x.env.Now()); err != nil {
			return err
		}
		sealed = true
		return nil
	})
	if err == nil && sealed {
		x.env.Telemetry.Indeterminate(metric)
	}
	return rec, err
}

// request reads the executor request a delivery carries — the gate's revision of the call
// record that moved it into execution — and its record key. A revision under another
// target's key is refused: the consumer's filter never delivers one, and its NATS user
// may not write one.
func (x *Executor) request(d bus.Delivery) (contracts.ExecRequest, string, error) {
	req, key, err := RequestOf(x.env.Names, d)
	if err == nil && req.Target != x.opts.Target {
		err = contracts.Reject(contracts.RejectInvalidField, "executor request %s is for target %q, not %q", key, req.Target, x.opts.Target)
	}
	return req, key, err
}

// RequestOf reads the [contracts.ExecRequest] of a delivery of the calls bucket's stream
// of type [contracts.TypeExecRequest]: the target from the record's key, the call, its
// pinned policy, attempt, input and dispatch mode from the record. It returns the key too.
// Every failure is a [*contracts.Rejection].
func RequestOf(n contracts.Names, d bus.Delivery) (contracts.ExecRequest, string, error) {
	key, runID, step, rec, err := pipeline.CallRecordOf(n, d)
	if err != nil {
		return contracts.ExecRequest{}, "", err
	}
	target, _, _, _, _ := contracts.ParseCallKey(key) // parsed by CallRecordOf already
	if rec.Input == nil {
		return contracts.ExecRequest{}, key, contracts.Reject(contracts.RejectInvalidField,
			"executor request %s: the record carries no input (written by an older gate?)", key)
	}
	req := contracts.ExecRequest{
		RunID: runID, Step: step, Index: rec.Index, CallID: rec.CallID, ToolID: rec.ToolID,
		Arguments: rec.Input, Target: target, Policy: rec.Policy, Attempt: rec.Phase.Attempt, Parallel: rec.Parallel,
	}
	if err := ValidateRequest(req); err != nil {
		return req, key, err
	}
	return req, key, nil
}

// DecodeRequest decodes an ExecRequest strictly: unknown fields, bad ids or a negative
// step are a *contracts.Rejection, so a malformed or mixed-version message is
// dead-lettered instead of misread.
func DecodeRequest(data []byte) (contracts.ExecRequest, error) {
	var req contracts.ExecRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, contracts.Reject(contracts.RejectInvalidJSON, "executor request: %v", err)
	}
	return req, ValidateRequest(req)
}

// ValidateRequest checks the ids, step and tool of an executor request; a failure is a
// [*contracts.Rejection].
func ValidateRequest(req contracts.ExecRequest) error {
	if err := contracts.ValidateID("run_id", req.RunID); err != nil {
		return contracts.Reject(contracts.RejectInvalidID, "executor request: %v", err)
	}
	if err := contracts.ValidateCallID("call_id", req.CallID); err != nil {
		return contracts.Reject(contracts.RejectInvalidID, "executor request: %v", err)
	}
	if req.Step < 0 {
		return contracts.Reject(contracts.RejectInvalidStep, "executor request: step %d is negative", req.Step)
	}
	if req.ToolID == "" {
		return contracts.Reject(contracts.RejectInvalidField, "executor request: tool_id is empty")
	}
	return nil
}

// FinishOutput turns what a tool returned into what is committed: the call id set, empty
// text replaced by the placeholder ([contracts.ToolOutput.Normalize]), and structurally
// valid and at most [MaxOutputBytes] of JSON — otherwise an execution error output that
// says why.
func FinishOutput(callID string, out contracts.ToolOutput) contracts.ToolOutput {
	out, _ = finishOutput(callID, out, MaxOutputBytes)
	return out
}

// finishOutput is [FinishOutput] against limit, also returning the size of the output's
// JSON when it was encoded (-1 when it was not: an error output, small by construction),
// so that byReference does not encode a large output a second time.
//
// An output whose strings alone exceed the limit is refused without being encoded: JSON
// writes every byte of a string as at least one byte, so its encoding is larger still, and
// encoding tens of MiB only to learn that costs the handler far more than the test.
func finishOutput(callID string, out contracts.ToolOutput, limit int) (contracts.ToolOutput, int) {
	out.CallID = callID
	out = out.Normalize()
	if err := out.Validate(); err != nil {
		return contracts.ExecutionFailed("invalid tool output: " + err.Error()).Output(callID), -1
	}
	tooLarge := func() (contracts.ToolOutput, int) {
		return contracts.ExecutionFailed(fmt.Sprintf("output exceeds %d bytes", limit)).Output(callID), -1
	}
	if stringBytes(out.Content) > limit {
		return tooLarge()
	}
	b, err := json.Marshal(out)
	if err != nil {
		return contracts.ExecutionFailed("tool output cannot be encoded: " + err.Error()).Output(callID), -1
	}
	if len(b) > limit {
		return tooLarge()
	}
	return out, len(b)
}

// stringBytes is a lower bound of the JSON size of blocks: the lengths of the strings
// that carry their payload (text, image data), nested blocks included.
func stringBytes(blocks []contracts.ContentBlock) int {
	n := 0
	for _, b := range blocks {
		n += len(b.Text) + stringBytes(b.Content)
		if b.Source != nil {
			n += len(b.Source.Data)
		}
	}
	return n
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
