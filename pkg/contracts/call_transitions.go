package contracts

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// This file is the durable state machine of one call (the per-call transitions of the
// reference's tool-call kernel), as methods of the record the services store. Every
// method first checks that the record is valid ([CallRecord.Validate]) and fails with
// [ErrInvalidPersistedState] otherwise; it either succeeds — moving the phase, setting the
// fields the move implies and stamping the timeline at the given time — or leaves the
// record unchanged. Values passed in are deep-copied. A CallRecord is a value owned by one
// goroutine at a time: durability and concurrency control (compare-and-swap on the store)
// belong to the services; these methods decide only whether a move is legal and what it
// produces.
//
// The moves:
//
//	Requested ──Decide/Probe──▶ Requested (decision recorded once)
//	Requested ──Dispatch──▶ Executing{1}            Awaiting ──Resume──▶ Executing{1}
//	Executing (not entered) ──Enter──▶ Executing (entered by a delivery)
//	Executing{n} (entered) ──Retry──▶ Executing{n+1} (within max_attempts)
//	Requested | Executing ──Park──▶ Awaiting        Awaiting ──Resolve──▶ Awaiting (resolver recorded)
//	Requested ──CompleteImmediate──▶ Completed      Executing | Awaiting ──Complete──▶ Completed
//	anything but Completed ──MarkIndeterminate──▶ Indeterminate

// NewCallRecord returns the record of call index of a batch as it is first written:
// Requested, with the recovery policy pinned from the trusted configuration.
func NewCallRecord(index int, call ToolCall, policy ToolRecoveryPolicy) CallRecord {
	return CallRecord{Index: index, CallID: call.CallID, ToolID: call.ToolID, Phase: RequestedPhase(), Policy: policy}
}

// Decide records the gate's decision on a Requested call made by the sequential path
// (o is nil when the call needs no permission decision: client execution, unknown tool)
// with the trace the batch runs in, and stamps [StageDecided]. A decision is recorded once
// ([ErrAlreadyDecided]); another phase fails with [ErrInvalidTransition].
func (r *CallRecord) Decide(o *GateOutcome, traceParent string, at time.Time) error {
	return r.decide(o, traceParent, StageDecided, at)
}

// Probe records the decision a parallel-delegation probe made (and audited itself) on a
// Requested call, and stamps [StageProbed]. Like [CallRecord.Decide] it records once.
func (r *CallRecord) Probe(o *GateOutcome, traceParent string, at time.Time) error {
	if o == nil {
		return fmt.Errorf("%w: call %q: a probe records only a permission decision", ErrInvalidTransition, r.CallID)
	}
	return r.decide(o, traceParent, StageProbed, at)
}

func (r *CallRecord) decide(o *GateOutcome, traceParent, stage string, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Phase.Kind != PhaseRequested {
		return r.badTransition("decide", "Requested")
	}
	if r.Decision != nil {
		return fmt.Errorf("%w: call %q", ErrAlreadyDecided, r.CallID)
	}
	if o != nil {
		cp := *o
		r.Decision = &cp
	}
	r.TraceParent = traceParent
	r.stamp(stage, at)
	return nil
}

// Dispatch commits the executor entry of a Requested call: Executing{1}, not yet entered
// by any executor. It must be committed before the executor request is published.
func (r *CallRecord) Dispatch(at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Phase.Kind != PhaseRequested {
		return r.badTransition("dispatch", "Requested")
	}
	r.toExecuting(1, StageExecuting, at)
	return nil
}

// Resume moves an Awaiting call into execution (Executing{1}, not entered: the attempt
// budget restarts per executor episode) when both kind and correlationID equal the
// committed wait; a stale or foreign approval fails with [ErrWaitMismatch] and changes
// nothing. Any other phase fails with [ErrInvalidTransition].
func (r *CallRecord) Resume(kind ToolWaitKind, correlationID string, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Phase.Kind != PhaseAwaiting {
		return r.badTransition("resume", "Awaiting")
	}
	if w := r.Phase.Wait; w.Kind != kind || w.CorrelationID != correlationID {
		return fmt.Errorf("%w: call %q awaits %s %q, resume names %s %q", ErrWaitMismatch, r.CallID, w.Kind, w.CorrelationID, kind, correlationID)
	}
	// Validate guarantees max_attempts ≥ 1, so attempt 1 is always within budget.
	r.toExecuting(1, StageExecuting, at)
	return nil
}

// Enter records that the executor delivery with stream sequence seq claimed the current
// attempt, before it invokes the tool. Only an Executing call nobody entered yet can be
// entered; anything else fails with [ErrInvalidTransition] (the executor tells a duplicate
// from its own redelivery by [CallRecord.EnteredBy] before asking).
func (r *CallRecord) Enter(seq uint64, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Phase.Kind != PhaseExecuting || r.Entered {
		return r.badTransition("enter", "Executing and not entered")
	}
	r.Entered, r.EnteredBy = true, seq
	r.stamp(StageEntered, at)
	return nil
}

// Retry moves an entered Executing{n} call to Executing{n+1}, entered by the delivery
// seq: the recovery of a redelivery whose handler died while the tool ran, under a
// policy that may replay. It fails with [ErrAttemptsExhausted] when n+1 would exceed the
// pinned max_attempts, and with [ErrInvalidTransition] from any other phase.
func (r *CallRecord) Retry(seq uint64, at time.Time) error {
	next, err := r.nextAttempt("retry")
	if err != nil {
		return err
	}
	r.toExecuting(next, StageRecovered, at)
	r.Entered, r.EnteredBy = true, seq
	return nil
}

// Requeue is [CallRecord.Retry] for an entered call whose delivery no longer exists (an
// open batch of an earlier version, whose work stream setup removed): the next attempt is
// entered by no delivery, so an executor that is handed the call takes it. The errors are
// Retry's.
func (r *CallRecord) Requeue(at time.Time) error {
	next, err := r.nextAttempt("requeue")
	if err != nil {
		return err
	}
	r.toExecuting(next, StageRecovered, at)
	return nil
}

// nextAttempt is the attempt that recovers an entered Executing call (op names the
// transition in the error): n+1 within the pinned max_attempts.
func (r *CallRecord) nextAttempt(op string) (uint16, error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	if r.Phase.Kind != PhaseExecuting || !r.Entered {
		return 0, r.badTransition(op, "Executing and entered")
	}
	if r.Phase.Attempt == math.MaxUint16 {
		return 0, fmt.Errorf("%w: call %q attempt counter would overflow", ErrAttemptsExhausted, r.CallID)
	}
	next := r.Phase.Attempt + 1
	if next > r.Policy.MaxAttempts {
		return 0, fmt.Errorf("%w: call %q attempt %d exceeds max_attempts %d", ErrAttemptsExhausted, r.CallID, next, r.Policy.MaxAttempts)
	}
	return next, nil
}

// Park parks a Requested or Executing call on a durable wait. An empty correlation fails
// with [ErrEmptyWaitCorrelation], an unknown kind or any other phase with
// [ErrInvalidTransition]. The single-wait rule is the batch's ([BatchRecord.CheckCalls]).
func (r *CallRecord) Park(kind ToolWaitKind, correlationID string, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Phase.Kind != PhaseRequested && r.Phase.Kind != PhaseExecuting {
		return r.badTransition("park", "Requested or Executing")
	}
	if correlationID == "" {
		return fmt.Errorf("%w: call %q", ErrEmptyWaitCorrelation, r.CallID)
	}
	if !validWaitKind(kind) {
		return fmt.Errorf("%w: call %q: unknown wait kind %q", ErrInvalidTransition, r.CallID, kind)
	}
	r.Phase = AwaitingPhase(kind, correlationID)
	r.stamp(StageAwaiting, at)
	return nil
}

// Resolver is who resolves the wait of an Awaiting call, for [CallRecord.Resolve].
type Resolver struct {
	// By is the ce-id of the resume command, or the timer's mark.
	By string
	// Actor names who decided (the command's actor, or [ActorTimer]).
	Actor string
	// Claimed is set when no door authenticated Actor (a command on the public subject).
	Claimed bool
	// EditedArguments are the arguments an approval edited the call to (nil: as proposed).
	EditedArguments json.RawMessage
	// EditBlocked is the policy's reason when it blocked the edited arguments.
	EditBlocked string
	// Approvals are the approvals a ticket that needs several had when it was resolved.
	Approvals []TicketApproval
}

// Resolve records that the resume command or ticket timer r.By resolves the wait of an
// Awaiting call, who decided, and the arguments an approval edited, so a redelivery of
// r.By re-publishes its outcome instead of being refused, and stamps [StageResumed]. The
// phase does not move: the resolution's own transition ([CallRecord.Resume],
// [CallRecord.Complete]) follows. Edited arguments must be a JSON object.
func (r *CallRecord) Resolve(res Resolver, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Phase.Kind != PhaseAwaiting {
		return r.badTransition("resolve", "Awaiting")
	}
	if res.By == "" {
		return fmt.Errorf("%w: call %q: a resolution needs its resolver", ErrInvalidTransition, r.CallID)
	}
	var edited json.RawMessage
	if res.EditedArguments != nil {
		var err error
		if edited, err = ArgumentsObject(res.EditedArguments); err != nil {
			return fmt.Errorf("%w: call %q: %w", ErrInvalidTransition, r.CallID, err)
		}
	}
	r.ResolvedBy, r.ResolvedActor, r.ResolvedActorClaimed = res.By, res.Actor, res.Claimed
	r.EditedArguments, r.EditBlocked = edited, res.EditBlocked
	r.Approvals = slices.Clone(res.Approvals)
	r.stamp(StageResumed, at)
	return nil
}

// Arguments returns the arguments the call runs with: the approved edit, else proposed
// (the submission's).
func (r *CallRecord) Arguments(proposed json.RawMessage) json.RawMessage {
	if r.EditedArguments != nil {
		return r.EditedArguments
	}
	return proposed
}

// Complete records the terminal output of an Executing or Awaiting call. out.CallID must
// be this call's id ([ErrUnknownCall] otherwise). Completing an already Completed call
// with an equal output (deep equality, JSON compared canonically) is an idempotent no-op,
// so a redelivered result is harmless; a different output, or any other phase, fails with
// [ErrInvalidTransition].
func (r *CallRecord) Complete(out ToolOutput, at time.Time) error {
	return r.complete(out, at, "complete", "Executing or Awaiting", PhaseExecuting, PhaseAwaiting)
}

// CompleteImmediate records the output of a Requested call that the runtime answered
// without entering an executor (a block, a gate-supplied result, an unknown tool). Like
// [CallRecord.Complete] it is idempotent on an equal output.
func (r *CallRecord) CompleteImmediate(out ToolOutput, at time.Time) error {
	return r.complete(out, at, "complete immediately", "Requested", PhaseRequested)
}

func (r *CallRecord) complete(out ToolOutput, at time.Time, op, want string, from ...PhaseKind) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if out.CallID != r.CallID {
		return fmt.Errorf("%w: output for call %q offered to call %q", ErrUnknownCall, out.CallID, r.CallID)
	}
	if r.Phase.Kind == PhaseCompleted && r.Phase.Output.Equal(out) {
		return nil
	}
	for _, k := range from {
		if r.Phase.Kind == k {
			r.Phase = CompletedPhase(out)
			r.stamp(StageCompleted, at)
			return nil
		}
	}
	if r.Phase.Kind == PhaseCompleted {
		return fmt.Errorf("%w: call %q is already Completed with a different output", ErrInvalidTransition, r.CallID)
	}
	return r.badTransition(op, want)
}

// CarryInput records args as what the executor runs, on a call the gate just moved into
// execution (Executing, not entered): the revision that commits it is the executor
// request. Any other phase fails with [ErrInvalidTransition].
func (r *CallRecord) CarryInput(args json.RawMessage) error {
	if !r.ExecutingUnentered() {
		return r.badTransition("carry input", "Executing and not entered")
	}
	r.Input = append(json.RawMessage(nil), args...)
	r.SlotWait = ""
	return nil
}

// ChargeCost records what the tool reported its just-completed call cost (the executor,
// in the write that commits the output): the gate settles the call's budget shares to it.
// nil records nothing. A call that is not Completed, or an amount that is negative or not
// finite, fails with [ErrInvalidTransition] and changes nothing.
func (r *CallRecord) ChargeCost(cost *float64) error {
	if cost == nil {
		return nil
	}
	if r.Phase.Kind != PhaseCompleted {
		return r.badTransition("charge a cost", "Completed")
	}
	if c := *cost; !(c >= 0) || math.IsInf(c, 0) {
		return fmt.Errorf("%w: call %q: cost %v is not a finite amount >= 0", ErrInvalidTransition, r.CallID, c)
	}
	c := *cost
	r.Cost = &c
	return nil
}

// WaitForSlot records that a call the gate moved into execution (Executing, not entered,
// not yet handed over with its input) waits for a slot of the concurrency limit named
// limit: it stays with no executor until [CallRecord.CarryInput] hands it over. Any other
// state fails with [ErrInvalidTransition].
func (r *CallRecord) WaitForSlot(limit string) error {
	if !r.ExecutingUnentered() || r.Input != nil {
		return r.badTransition("wait for a slot", "Executing, not entered, not handed over")
	}
	if limit == "" {
		return fmt.Errorf("%w: call %q: wait for a slot of no limit", ErrInvalidTransition, r.CallID)
	}
	r.SlotWait = limit
	return nil
}

// RunOutsideSequence marks the call as run outside its batch's sequential order: entered
// by a parallel-delegation probe with the rest of its batch, or sealed with every call of
// its batch at once. Its output then advances no sequential dispatch ([CallRecord.Parallel]).
func (r *CallRecord) RunOutsideSequence() { r.Parallel = true }

// MarkIndeterminate records that the call's external outcome cannot be determined, from
// any phase except Completed (an Indeterminate call takes the new reason). A Completed
// call fails with [ErrInvalidTransition]: a committed result is never downgraded.
func (r *CallRecord) MarkIndeterminate(reason string, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Phase.Kind == PhaseCompleted {
		return r.badTransition("mark indeterminate", "any phase but Completed")
	}
	r.Phase = IndeterminatePhase(reason)
	r.stamp(StageIndeterminate, at)
	return nil
}

// Clone returns a copy of r whose timeline and decision are its own, so transitions on
// the copy never write into r (a record read once and tried against a compare-and-swap).
// The phase's output and wait are never written through by a transition, so they may be
// shared.
func (r CallRecord) Clone() CallRecord {
	r.Timeline = append([]TimelineMark(nil), r.Timeline...)
	r.Reconciles = append([]CallReconcile(nil), r.Reconciles...)
	if r.Decision != nil {
		d := *r.Decision
		r.Decision = &d
	}
	return r
}

// AdoptPolicy pins p on a record written without a usable recovery policy (a record of
// an older version); a record that has one keeps it. It reports whether p was adopted.
func (r *CallRecord) AdoptPolicy(p ToolRecoveryPolicy) bool {
	if batchPolicyProblem(r.Policy) == "" {
		return false
	}
	r.Policy = p
	return true
}

// HeldBy reports whether the delivery seq entered attempt of the call and still owns it:
// only that delivery may complete the attempt.
func (r *CallRecord) HeldBy(attempt uint16, seq uint64) bool {
	return r.Phase.Kind == PhaseExecuting && r.Phase.Attempt == attempt && r.Entered && r.EnteredBy == seq
}

// ExecutingUnentered reports whether the gate committed an executor entry that no
// executor has taken yet: the executor request is the gate's to (re-)publish.
func (r *CallRecord) ExecutingUnentered() bool {
	return r.Phase.Kind == PhaseExecuting && !r.Entered
}

// IndeterminateFor reports whether the call is Indeterminate with exactly reason (sealed
// by the very cause the caller applies).
func (r *CallRecord) IndeterminateFor(reason string) bool {
	return r.Phase.Kind == PhaseIndeterminate && r.Phase.Reason == reason
}

// Output returns the model-visible result of a terminal call: the committed output of a
// Completed call, or for an Indeterminate call an error output with the text
// "tool outcome is indeterminate: {reason}". It returns false for a non-terminal call.
// The result is a copy.
func (r *CallRecord) Output() (ToolOutput, bool) {
	switch r.Phase.Kind {
	case PhaseCompleted:
		if r.Phase.Output == nil {
			return ToolOutput{}, false
		}
		return batchCloneOutput(*r.Phase.Output), true
	case PhaseIndeterminate:
		return ErrorOutput(r.CallID, IndeterminatePrefix+r.Phase.Reason), true
	}
	return ToolOutput{}, false
}

// IndeterminatePrefix starts the model-visible error text of an Indeterminate call.
const IndeterminatePrefix = "tool outcome is indeterminate: "

// Outcome is the terminal kind of a terminal call (Indeterminate or Completed).
func (r *CallRecord) Outcome() Outcome {
	if r.Phase.Kind == PhaseIndeterminate {
		return OutcomeIndeterminate
	}
	return OutcomeCompleted
}

// MarkTime returns the time of the last timeline mark of stage.
func (r *CallRecord) MarkTime(stage string) (time.Time, bool) {
	for i := len(r.Timeline) - 1; i >= 0; i-- {
		if r.Timeline[i].Stage == stage {
			return r.Timeline[i].At, true
		}
	}
	return time.Time{}, false
}

// Validate checks every invariant one call record carries on its own: a valid call id, a
// valid recovery policy, a well-formed phase, an Executing attempt within
// 1..max_attempts, a non-empty wait correlation and a Completed output for this very
// call. Errors wrap [ErrInvalidPersistedState] (and [ErrInvalidID]) or
// [ErrEmptyWaitCorrelation].
func (r *CallRecord) Validate() error {
	if r == nil {
		return fmt.Errorf("%w: nil call record", ErrInvalidPersistedState)
	}
	if err := ValidateCallID("call_id", r.CallID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPersistedState, err)
	}
	if msg := batchPolicyProblem(r.Policy); msg != "" {
		return fmt.Errorf("%w: call %q %s", ErrInvalidPersistedState, r.CallID, msg)
	}
	if err := r.Phase.check(); err != nil {
		return fmt.Errorf("call %q: %w", r.CallID, err)
	}
	switch r.Phase.Kind {
	case PhaseExecuting:
		if r.Phase.Attempt > r.Policy.MaxAttempts {
			return fmt.Errorf("%w: call %q has an out-of-budget execution attempt %d (max_attempts %d)", ErrInvalidPersistedState, r.CallID, r.Phase.Attempt, r.Policy.MaxAttempts)
		}
	case PhaseCompleted:
		if r.Phase.Output.CallID != r.CallID {
			return fmt.Errorf("%w: call %q contains another call's output (%q)", ErrInvalidPersistedState, r.CallID, r.Phase.Output.CallID)
		}
	}
	return nil
}

// toExecuting enters attempt, not yet claimed by any executor delivery.
func (r *CallRecord) toExecuting(attempt uint16, stage string, at time.Time) {
	r.Phase = ExecutingPhase(attempt)
	r.Entered, r.EnteredBy = false, 0
	r.stamp(stage, at)
}

func (r *CallRecord) stamp(stage string, at time.Time) {
	r.Timeline = append(r.Timeline, TimelineMark{Stage: stage, At: at})
}

func (r *CallRecord) badTransition(op, want string) error {
	return fmt.Errorf("%w: cannot %s call %q in phase %s (needs %s)", ErrInvalidTransition, op, r.CallID, r.Phase.Kind, want)
}

// batchPolicyProblem describes why p cannot be pinned on a call, or returns "".
func batchPolicyProblem(p ToolRecoveryPolicy) string {
	if !p.Mode.Valid() {
		return fmt.Sprintf("has an unknown recovery mode %q", p.Mode)
	}
	if p.MaxAttempts == 0 {
		return "has max_attempts 0"
	}
	return ""
}

// ReplaceProbedDecision replaces the decision a parallel-delegation probe recorded on a
// Requested call that no gate has applied yet with o (a call cancel's fixed result), keeping
// the probe's shadow findings. Only a Requested call with a recorded decision qualifies.
func (r *CallRecord) ReplaceProbedDecision(o *GateOutcome) error {
	if o == nil || r.Phase.Kind != PhaseRequested || r.Decision == nil {
		return fmt.Errorf("%w: call %q: only a Requested call's recorded decision is replaced", ErrInvalidTransition, r.CallID)
	}
	o.Shadow = r.Decision.Shadow
	r.Decision = o
	return nil
}

// MarkCancelled records who cancelled the call, why and how the cancel ended it. It is set
// once: a call cancelled already keeps its first mark.
func (r *CallRecord) MarkCancelled(m *CallCancelMark) error {
	if m == nil {
		return fmt.Errorf("%w: call %q: an empty cancel mark", ErrInvalidTransition, r.CallID)
	}
	if r.Cancel != nil {
		return nil
	}
	r.Cancel = m
	return nil
}
