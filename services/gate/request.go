package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// maxCASAttempts bounds the compare-and-swap retries of one handler on one record
// ([tickets.MaxCASAttempts]).
const maxCASAttempts = tickets.MaxCASAttempts

// errRaced means another writer changed the record between our read and our write
// ([tickets.ErrRaced], which the ticket handler retries on).
var errRaced = tickets.ErrRaced

// loadCall reads the record of call i of b. A missing record is returned as a fresh
// Requested record with revision 0, which [Service.putCall] creates.
func (s *Service) loadCall(ctx context.Context, b *contracts.BatchRecord, i int) (contracts.CallRecord, uint64, error) {
	key := callKey(b, i)
	rec, rev, err := s.env.Calls.Get(ctx, key)
	found := err == nil
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return contracts.CallRecord{}, 0, fmt.Errorf("gate: read call %s: %w", key, err)
	}
	rec, err = readCall(b, i, rec, found)
	return rec, rev, err
}

// readCall is call i's record as read: a fresh Requested record when none was found, else
// the stored one, which must belong to call i of b.
func readCall(b *contracts.BatchRecord, i int, rec contracts.CallRecord, found bool) (contracts.CallRecord, error) {
	if !found {
		return newCallRecord(b, i), nil
	}
	if err := b.CheckCall(i, &rec); err != nil {
		return contracts.CallRecord{}, bus.Permanent(err)
	}
	return rec, nil
}

// loadCalls is loadCall for every call of b, with one batch get instead of a read per
// call (the probe of a parallel batch).
func (s *Service) loadCalls(ctx context.Context, b *contracts.BatchRecord) ([]contracts.CallRecord, []uint64, error) {
	n := len(b.Submission.Calls)
	keys := make([]string, n)
	for i := range n {
		keys[i] = callKey(b, i)
	}
	entries, err := s.env.Calls.GetMany(ctx, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("gate: read the calls of %s: %w", b.Submission.BatchID(), err)
	}
	recs, revs := make([]contracts.CallRecord, n), make([]uint64, n)
	for i, key := range keys {
		e, found := entries[key]
		if recs[i], err = readCall(b, i, e.Value, found); err != nil {
			return nil, nil, err
		}
		revs[i] = e.Revision
	}
	return recs, revs, nil
}

// putCall writes rec: Create when rev is 0, else a compare-and-swap on rev. It returns the
// new revision. A lost race is reported as [errRaced] so the caller re-reads and decides
// again from what is committed.
func (s *Service) putCall(ctx context.Context, b *contracts.BatchRecord, i int, rec contracts.CallRecord, rev uint64) (uint64, error) {
	key := callKey(b, i)
	var next uint64
	var err error
	if rev == 0 {
		next, err = s.env.Calls.Create(ctx, key, rec)
	} else {
		next, err = s.env.Calls.UpdateAt(ctx, key, rec, rev)
	}
	switch {
	case errors.Is(err, state.ErrExists), errors.Is(err, state.ErrConflict):
		return 0, errRaced
	case err != nil:
		return 0, fmt.Errorf("gate: write call %s: %w", key, err)
	}
	return next, nil
}

// callKey is the key of call i of b: its pinned target first, so only the gate, which
// takes the target from the pin, hands a call to an executor.
func callKey(b *contracts.BatchRecord, i int) string { return contracts.CallKeyOf(b, i) }

// callOp is the operation id of call i of b.
func callOp(b *contracts.BatchRecord, i int) string {
	sub := &b.Submission
	return contracts.OperationID(sub.RunID, sub.Step, sub.Calls[i].CallID)
}

// gateCall gates call i of b as a sub-operation of its own ([Service.gateCallEffects]
// run by the effects runtime): the gate's work for a call whose asking revision's handler
// gates several (a declared-parallel batch, a probe's fallback to call 0).
func (s *Service) gateCall(ctx context.Context, b *contracts.BatchRecord, i int, assumeNew bool) error {
	eff, err := s.gateCallEffects(ctx, b, i, assumeNew)
	if err != nil {
		return err
	}
	return s.env.Apply(ctx, ServiceName, eff)
}

// gateCallEffects gates call i of a sequential batch (asked by the revision that recorded
// the batch, for call 0, or by call i-1's output, dispatch.go): a Requested call is
// decided here — or its decision recorded by a probe is reused — and the effects commit
// the outcome in one write, handing the call to whom the decision names
// ([callHandOffs]), then publish what it implies; a call past Requested only re-publishes
// what its committed state implies, so a redelivered revision never decides twice.
//
// assumeNew skips the first read: the caller expects no record yet (the first delivery of
// the revision that asks for the call, whose record nobody else writes before the gate), so the
// decision is written with a create, and only a create that finds a record (a cancelled
// or sealed call, a redelivery) pays for the read and decides again from what is there.
// That saves one round trip on the path of every call a host limit does not match (one a
// limit matches is read first: see [Service.prepareCall]).
func (s *Service) gateCallEffects(ctx context.Context, b *contracts.BatchRecord, i int, assumeNew bool) (pipeline.Effects, error) {
	ctx = withCall(ctx, b, i)
	return s.gateCallAttempt(ctx, zerolog.Ctx(ctx), b, i, assumeNew, 1)
}

// gateCallAttempt is attempt number attempt of [Service.gateCallEffects], with log the
// call's logger. A commit that loses its compare-and-swap (another writer changed the
// record between the read and the write: a cancellation's decision, a concurrent
// delivery's) commits nothing; the next step then gates the call again from what is
// committed, as an attempt of its own whose commit names the hand-offs of its own
// decision, at most [maxCASAttempts] in all.
func (s *Service) gateCallAttempt(ctx context.Context, log *zerolog.Logger, b *contracts.BatchRecord, i int, assumeNew bool, attempt int) (pipeline.Effects, error) {
	eff := pipeline.Effects{Op: callOp(b, i), Log: log}
	g, err := s.prepareCall(ctx, b, i, assumeNew)
	if err != nil {
		return eff, err
	}
	if !g.requested {
		return eff.Then(pipeline.Publish(func(ctx context.Context) error {
			return s.realizeRecorded(ctx, b, i, &g.rec)
		})), nil
	}
	var raced bool
	return eff.Then(
		// The decision and what it implies for the call, in one write: the executor request
		// of an allowed call, the output of a blocked or completed one, a parked call's wait.
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			switch _, err := s.putCall(ctx, b, i, g.rec, g.rev); {
			case errors.Is(err, errRaced):
				raced = true
				return false, nil
			case err != nil:
				return false, err
			}
			if g.decidedNow && g.d.outcome != nil {
				// Counted once: only the delivery whose write recorded the decision gets here.
				s.env.Telemetry.GateDecision(g.d.outcome.AuditLabel())
			}
			return true, nil
		}, callHandOffs(&g.rec)...),
		pipeline.Do(func(ctx context.Context) error {
			if !raced {
				return nil
			}
			if attempt >= maxCASAttempts {
				return fmt.Errorf("gate: call %s: %d concurrent writers in a row", callOp(b, i), maxCASAttempts)
			}
			again, err := s.gateCallAttempt(ctx, log, b, i, false, attempt+1)
			if err != nil {
				return err
			}
			if err := s.env.Apply(ctx, ServiceName, again); err != nil {
				return err
			}
			return pipeline.ErrSettled
		}),
		pipeline.Publish(func(ctx context.Context) error {
			return s.realizeDecided(ctx, b, i, &g.rec, g.d)
		}),
	), nil
}

// callGate is one gating of a call, passed from the handler's decision to the steps that
// commit and realize it.
type callGate struct {
	rec contracts.CallRecord
	rev uint64
	d   decision
	// requested: rec is Requested as read, so d applied to it is the write to commit;
	// otherwise rec is the record found past Requested, and nothing is written.
	requested bool
	// decidedNow: d was decided now, not recorded by a probe before.
	decidedNow bool
}

// callHandOffs names who the revision rec of a call record hands the call to when it is
// written: its executor (Executing, not entered, with its input: an allowed call), the
// barrier and the gate's sequential dispatch (terminal: a blocked call, a fixed result, an
// unknown tool, a capability bound), or no one (a parked call awaiting an approval or its
// due time, a decision alone, a call waiting for a concurrency slot).
func callHandOffs(rec *contracts.CallRecord) []pipeline.HandOff {
	switch {
	case rec.Phase.IsTerminal():
		return []pipeline.HandOff{pipeline.ToBarrier}
	case rec.ExecutingUnentered() && rec.Input != nil:
		return []pipeline.HandOff{pipeline.ToExecutor}
	}
	return nil
}

// prepareCall reads call i of b (unless assumeNew) and, when it is Requested, decides it
// and applies the decision to the record: the write the commit makes. A call past
// Requested (an earlier delivery, a probe or a cancellation wrote it) is returned as
// found, to re-publish.
func (s *Service) prepareCall(ctx context.Context, b *contracts.BatchRecord, i int, assumeNew bool) (*callGate, error) {
	// A call a limit matches is read first even on its first delivery: its ledger writes
	// come before the decision's, and once an ended call's share has folded into used (or
	// its slot gone back) nothing in the ledger says it was counted — only its record
	// tells a decided call from a new one.
	if assumeNew && s.limits.MatchesAny(b.Submission.Calls[i]) {
		assumeNew = false
	}
	g := &callGate{}
	var err error
	if assumeNew {
		g.rec = newCallRecord(b, i)
	} else if g.rec, g.rev, err = s.loadCall(ctx, b, i); err != nil {
		return nil, err
	}
	if g.rec.Phase.Kind != contracts.PhaseRequested {
		return g, nil
	}
	g.requested = true
	g.d = decision{outcome: g.rec.Decision}
	g.decidedNow = g.rec.Decision == nil
	if g.decidedNow {
		if g.d, err = s.decideNow(ctx, b, i, nil); err != nil {
			return nil, err
		}
		if err := g.rec.Decide(g.d.outcome, s.env.Telemetry.TraceParent(ctx), s.env.Now()); err != nil {
			return nil, bus.Permanent(fmt.Errorf("gate: decide call %s: %w", callOp(b, i), err))
		}
	}
	if s.takesSlot(b, i, g.d) {
		if g.d.slotWait, err = s.limits.Acquire(ctx, b, i); err != nil {
			return nil, err
		}
	}
	if err := s.applyDecision(b, i, &g.rec, g.d); err != nil {
		return nil, bus.Permanent(err)
	}
	return g, nil
}

// realizeDecided publishes what the decision d, just committed on call i's record rec,
// implies ([Service.realizeDecision]), then looks at the ledger again for a call that
// waits for a slot — a slot handed to it before its waiting record was written found
// nothing to hand over (slots.go) — and ends the run of a call its capability bound.
func (s *Service) realizeDecided(ctx context.Context, b *contracts.BatchRecord, i int, rec *contracts.CallRecord, d decision) error {
	if err := s.realizeDecision(ctx, b, i, rec); err != nil {
		return err
	}
	if d.slotWait != "" {
		if err := s.admit(ctx, b, i, false); err != nil {
			return err
		}
	}
	if d.bound != "" {
		return s.endCapabilityBound(ctx, b, d.bound)
	}
	return nil
}

// realizeRecorded re-publishes what call i's record rec, found past Requested, implies:
// what its decision implies, the slots of a call that ended after it took them, the
// hand-over of a waiting call whose writer may have died before it looked at the ledger
// again, the end of the run of a call its capability bound.
func (s *Service) realizeRecorded(ctx context.Context, b *contracts.BatchRecord, i int, rec *contracts.CallRecord) error {
	if err := s.realizeDecision(ctx, b, i, rec); err != nil {
		return err
	}
	// A slot this or an earlier delivery took before the call was sealed (a cancellation
	// won the write) goes back.
	if err := s.giveBackIfEnded(ctx, b, i, *rec); err != nil {
		return err
	}
	if rec.SlotWait != "" && rec.ExecutingUnentered() && rec.Input == nil {
		// The delivery that wrote the waiting record may have died before it looked at the
		// ledger again.
		if err := s.admit(ctx, b, i, false); err != nil {
			return err
		}
	}
	if isCapabilityBound(rec) {
		return s.endCapabilityBound(ctx, b, rec.Phase.Reason)
	}
	return nil
}

// applyDecision moves the Requested record rec of call i to the phase d implies and records
// d's permission outcome on it:
//   - Allow → Executing{1}, not entered, after [Service.entryCheck]; a pinned policy the
//     tool's capability no longer supports completes the call with "tool execution failed";
//   - Block and SetResult → Completed with "blocked: {reason}" or the gate's output;
//   - RequireConfirmation → Awaiting{tool_permission}; Schedule → Awaiting{scheduled_action};
//   - client execution → Awaiting{external_result};
//   - unknown tool → Completed with "unknown tool: {id}";
//   - arguments that are a string holding no object → Completed with "invalid tool arguments: …".
func (s *Service) applyDecision(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, d decision) error {
	sub := &b.Submission
	call := sub.Calls[i]
	now := s.env.Now()
	var err error
	switch {
	case d.bound != "":
		err = rec.MarkIndeterminate(d.bound, now)
	case d.unknown:
		err = rec.CompleteImmediate(contracts.ErrUnknownTool(call.ToolID).Output(call.CallID).Normalize(), now)
	case d.invalid != nil:
		err = rec.CompleteImmediate(d.invalid.Output(call.CallID).Normalize(), now)
	case d.client:
		err = rec.Park(contracts.WaitExternalResult,
			contracts.CorrelationID(contracts.ReasonClientExecution, sub.RunID, sub.Step, call.CallID), now)
	case d.outcome == nil:
		return fmt.Errorf("gate: call %s: empty decision", call.CallID)
	default:
		o := d.outcome
		switch o.Kind {
		case contracts.GateAllow:
			err = s.enter(b, i, rec, d.slotWait)
		case contracts.GateBlock, contracts.GateSetResult:
			out, _ := o.ImmediateOutput(call.CallID)
			err = rec.CompleteImmediate(out.Normalize(), now)
		case contracts.GateRequireConfirmation:
			err = rec.Park(contracts.WaitToolPermission, o.CorrelationID, now)
		case contracts.GateSchedule:
			err = rec.Park(contracts.WaitScheduledAction, o.CorrelationID, now)
		default:
			// An outcome of unknown kind (a record written by a newer version) fails closed.
			out := contracts.ErrorOutput(call.CallID, contracts.BlockedPrefix+fmt.Sprintf("unknown gate outcome %q", o.Kind))
			err = rec.CompleteImmediate(out, now)
		}
	}
	if err != nil {
		return fmt.Errorf("gate: apply decision to call %s: %w", call.CallID, err)
	}
	return nil
}

// enter moves a Requested or Awaiting call into Executing{1}, or — when the pinned policy no
// longer fits the tool's capability — completes it with the execution error instead. A
// tool with a host fixed result never enters an executor: it completes with that result.
// slotWait, for a Requested call, names the concurrency limit it found no free slot of: it
// enters execution without its input, waiting (slots.go).
func (s *Service) enter(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, slotWait string) error {
	call := b.Submission.Calls[i]
	now := s.env.Now()
	complete := rec.CompleteImmediate
	if rec.Phase.Kind == contracts.PhaseAwaiting {
		complete = rec.Complete
	}
	if err := s.entryCheck(b.Pinned[i], call.ToolID); err != nil {
		return complete(contracts.ExecutionFailed(err.Error()).Output(call.CallID).Normalize(), now)
	}
	if fixed, ok := s.fixedResult(call); ok {
		return complete(fixed.Normalize(), now)
	}
	if rec.Phase.Kind == contracts.PhaseAwaiting {
		// A resolution hands the call over in a write of its own, after its audit record
		// and ticket.resolved are stored ([Service.handOver]): no body of an approved call
		// starts before its approval is on the audit stream.
		w := rec.Phase.Wait
		return rec.Resume(w.Kind, w.CorrelationID, now)
	}
	if err := rec.Dispatch(now); err != nil {
		return err
	}
	if slotWait != "" {
		return rec.WaitForSlot(slotWait)
	}
	// The revision that commits the decision and the entry is the executor request: it
	// carries what runs.
	return rec.CarryInput(rec.Arguments(call.Arguments))
}

// errHandOverUnseen: the call record read for a hand-over does not show the resolution
// that moved it into execution yet.
var errHandOverUnseen = errors.New("call record does not show its tickets.Resolution yet")

// handOver gives call i, moved into execution by a resolution or waiting for a slot, to
// its executor: it writes the record again with the input that runs (the approval's edit,
// or the proposed arguments), and that revision is the executor request. A call already
// handed over, or no longer waiting for it, is left alone, so a redelivered resolution
// repeats nothing. strict: the caller wrote the call into execution, so a record that
// does not show it yet is an error (see [Service.admit]). It returns the record as it
// stands.
func (s *Service) handOver(ctx context.Context, b *contracts.BatchRecord, i int, strict bool) (contracts.CallRecord, error) {
	call := b.Submission.Calls[i]
	rec, _, err := s.env.Calls.Update(ctx, callKey(b, i), func(cur *contracts.CallRecord, exists bool) error {
		if !exists || cur.Phase.Kind == contracts.PhaseAwaiting || cur.Phase.Kind == contracts.PhaseRequested {
			if !strict {
				return state.ErrNoChangeOnLeader
			}
			// The resolution that moved the call into execution is written before this
			// hand-over, so only a replica behind it answers so. ErrNoChange here would be
			// final unconfirmed — the call stranded in Executing without its request
			// (seen in make chaos-cluster) — whereas an error is
			// confirmed on the leader's value by Update, and retried by redelivery if the
			// leader says so too.
			return errHandOverUnseen
		}
		if !cur.ExecutingUnentered() || cur.Input != nil {
			return state.ErrNoChange
		}
		return cur.CarryInput(cur.Arguments(call.Arguments))
	})
	if err != nil {
		return rec, fmt.Errorf("gate: hand call %s to its executor: %w", call.CallID, err)
	}
	return rec, nil
}

// enterUnlessPaused is [Service.enter] for a parked call whose ticket was resolved to
// run it (an approval, a scheduled action's due time): while its tool is paused (pause
// not nil, read with [pipeline.Env.ToolPaused] before the resolution) the call completes
// with the pause's blocked output instead, so the kill switch also holds back calls that
// were decided before it but have not started.
func (s *Service) enterUnlessPaused(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, pause *contracts.ToolPause) error {
	if pause != nil {
		out, _ := pause.GateOutcome().ImmediateOutput(b.Submission.Calls[i].CallID)
		return rec.Complete(out.Normalize(), s.env.Now())
	}
	return s.enter(b, i, rec, "")
}

// takesSlot reports whether the call i that d decides enters execution now and a
// concurrency limit applies to it: then its entry needs a slot first.
func (s *Service) takesSlot(b *contracts.BatchRecord, i int, d decision) bool {
	if d.bound != "" || d.unknown || d.invalid != nil || d.client || d.outcome == nil || d.outcome.Kind != contracts.GateAllow {
		return false
	}
	call := b.Submission.Calls[i]
	if !s.limits.HasSlots(call) || s.entryCheck(b.Pinned[i], call.ToolID) != nil {
		return false
	}
	_, fixed := s.fixedResult(call)
	return !fixed
}

// disposition is the projection of call i's decision for the tool_call fact: pending_client
// for a client-executed call, pending_builtin for a permission or schedule wait, executed
// for everything else (allow, block, set_result, unknown tool).
func disposition(rec *contracts.CallRecord, client bool) contracts.ToolDisposition {
	switch {
	case rec.Decision != nil && rec.Decision.IsWait():
		return contracts.DispositionPendingBuiltin
	case rec.Decision == nil && client:
		return contracts.DispositionPendingClient
	}
	return contracts.DispositionExecuted
}

// isClient reports whether call i parks as a client-executed call (see [Service.decide]).
func isClient(b *contracts.BatchRecord, i int) bool {
	pin := b.Pinned[i]
	return pin.Known && pin.Kind == contracts.KindClientExecuted && visible(b, i)
}

// visible reports whether call i's tool is among the tools the model saw in the batch's
// agent snapshot.
func visible(b *contracts.BatchRecord, i int) bool {
	return slices.Contains(b.Submission.Agent.Tools, b.Submission.Calls[i].ToolID)
}

// realizeDecision publishes everything the committed record rec of call i implies after a
// gate decision, and nothing it does not. It is idempotent: every message carries its
// deterministic id, and the ticket is created only if missing. It runs both right after the
// commit and for a redelivered request that finds the work already recorded.
//
// With it, if the gate decided the call (a call sealed by cancellation before its gate ran
// has neither): the audit record of a permission decision this path made (client execution
// and unknown tools have none; a probe audits its own decisions) and the live tool_call
// fact.
// What the phase implies:
//   - Executing or terminal: nothing beyond the copies — the revision that moved the call
//     into execution is its executor request, a terminal one its CallOutput (the record
//     is the work), both already stored;
//   - Awaiting: the ticket (created if missing), its timer, ticket.opened and the awaiting
//     fact — and no CallOutput: the batch stops at the parked call.
//
// The decision with its audit data — the outcome, its reason, the time it was decided — is
// durable in the call record before anything downstream can act on the call: that write
// comes first, and is itself the hand-off. The audit record is a copy of it, published
// right after it, and complete all the same: the request is acknowledged only once it is
// stored, and a redelivery publishes it again (deterministic ids). The tool_call fact is a
// projection of both, sent (core NATS, never stored) once the audit record is stored: it
// adds no write to the call's path, and a redelivery sends it again. A
// parked call keeps the order audit → ticket, so no resolution of the ticket can be
// audited ahead of the decision that opened it.
func (s *Service) realizeDecision(ctx context.Context, b *contracts.BatchRecord, i int, rec *contracts.CallRecord) error {
	bd := s.builder(b)
	var first collect
	if rec.Phase.Kind != contracts.PhaseAwaiting {
		decisionMessages(bd, b, i, rec, &first)
		return first.publish(ctx, s.env.Pub)
	}
	copies(bd, b, i, rec, &first)
	if err := first.publish(ctx, s.env.Pub); err != nil {
		return err
	}
	t, err := s.tickets.TicketFor(b, i, rec)
	if err != nil {
		return err
	}
	live, err := s.tickets.EnsureTicket(ctx, b, i, t)
	if err != nil {
		return err
	}
	if !live {
		return nil
	}
	if err := s.tickets.ScheduleTimers(ctx, t); err != nil {
		return err
	}
	var then collect
	then.add(bd.opened(t))
	then.add(bd.awaitingFact(i))
	return then.publish(ctx, s.env.Pub)
}

// copies adds the audit record and the live tool_call fact of the decision recorded on rec,
// the committed record of call i, to c (see [Service.realizeDecision]).
func copies(bd builder, b *contracts.BatchRecord, i int, rec *contracts.CallRecord, c *collect) {
	if at, ok := rec.MarkTime(contracts.StageDecided); ok && rec.Decision != nil {
		c.add(bd.audit(i, rec.Decision, at))
	}
	if _, ok := decidedAt(rec); ok {
		c.addLive(bd.toolCallFact(i, disposition(rec, isClient(b, i))))
	}
}

// decisionMessages adds to c everything the committed record rec of call i, which is not
// Awaiting, implies: the copies of its decision. Nothing more: the revision that moved the
// call into execution is its executor request, and a terminal revision is its output
// (internal/pipeline records.go).
func decisionMessages(bd builder, b *contracts.BatchRecord, i int, rec *contracts.CallRecord, c *collect) {
	copies(bd, b, i, rec, c)
}
