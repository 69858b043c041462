package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file is the durable state machine of one model-emitted tool-call batch (reference
// §1.11, §2.1, §2.2, §2.5): the per-call transitions that every service applies to its
// call records, the [ToolBatch] aggregate that adds the batch-level rules, and the
// cross-check between a committed [ResumeTicket] and the wait it claims to resume.
//
// Nothing here is safe for concurrent mutation: a [ToolBatch] or [DurableToolCall] is a
// value owned by one goroutine at a time. Durability and concurrency control (KV
// compare-and-swap) belong to the services; this code decides only whether a transition
// is legal and what state it produces.

// Errors of the batch state machine (the original ToolBatchError kinds). Every error
// returned by this file wraps exactly one of them (decode errors wrap
// [ErrInvalidPersistedState] and, where there is one, the specific kind too), with a
// detail naming the call; test with [errors.Is].
var (
	// ErrEmptyRunID: a batch needs a non-empty run id.
	ErrEmptyRunID = errors.New("tool batch run id must not be empty")
	// ErrInvalidBatchID: the batch id is not "tool-batch:{run_id}:{step}" of its own run.
	ErrInvalidBatchID = errors.New("tool batch id does not belong to its run")
	// ErrEmptyBatch: a batch must contain at least one call.
	ErrEmptyBatch = errors.New("tool batch must contain at least one call")
	// ErrDuplicateCall: two calls of one batch share a call id.
	ErrDuplicateCall = errors.New("duplicate tool call id")
	// ErrUnknownCall: the call id (or an output's call id) names no call of the aggregate.
	ErrUnknownCall = errors.New("unknown tool call id")
	// ErrBatchFinalized: every mutator refuses a finalized batch.
	ErrBatchFinalized = errors.New("tool batch is already finalized")
	// ErrInvalidTransition: the call's phase does not admit the operation.
	ErrInvalidTransition = errors.New("invalid tool-call transition")
	// ErrAttemptsExhausted: one more attempt would exceed the pinned max_attempts.
	ErrAttemptsExhausted = errors.New("tool-call attempt budget exhausted")
	// ErrWaitMismatch: a resume names another wait kind or correlation than the committed
	// wait, so it cannot enter execution.
	ErrWaitMismatch = errors.New("tool wait kind or correlation does not match")
	// ErrMultipleAwaitingCalls: a batch may hold at most one awaiting call (one ticket per
	// run).
	ErrMultipleAwaitingCalls = errors.New("tool batch may contain at most one awaiting call")
	// ErrEmptyWaitCorrelation: a wait needs a correlation id, or nothing could resume it.
	ErrEmptyWaitCorrelation = errors.New("tool wait correlation must not be empty")
	// ErrIncomplete: the batch still holds non-terminal calls.
	ErrIncomplete = errors.New("tool batch still contains non-terminal calls")
	// ErrInvalidPersistedState: stored (or hand-built) state violates an invariant; it
	// fails closed before any recovery acts on it.
	ErrInvalidPersistedState = errors.New("persisted tool batch is invalid")
	// ErrInvalidCall: a call handed to [NewToolBatch] is not a well-formed Requested call
	// (invalid call id, invalid recovery policy, another phase, or staged state). Not in
	// the original, whose constructor cannot receive such calls.
	ErrInvalidCall = errors.New("invalid tool call for a new batch")
)

// Errors of the cross-aggregate check between a committed [ResumeTicket] and the batch or
// call it claims to resume (the original ToolBatchWaitError kinds, plus the batch axis the
// Go ticket carries). Test with [errors.Is].
var (
	// ErrTicketFinalized: the batch is finalized, so nothing in it awaits.
	ErrTicketFinalized = errors.New("tool batch is finalized")
	// ErrTicketRunMismatch: the ticket belongs to another run.
	ErrTicketRunMismatch = errors.New("resume ticket belongs to another run")
	// ErrTicketThreadMismatch: the ticket belongs to another thread.
	ErrTicketThreadMismatch = errors.New("resume ticket belongs to another thread")
	// ErrTicketBatchMismatch: the ticket names another batch of the run. Call ids are
	// provider-local and may repeat across steps, so the batch is an axis of its own.
	ErrTicketBatchMismatch = errors.New("resume ticket belongs to another tool batch")
	// ErrTicketNotToolCall: the ticket's reason is not one of the tool-call wait reasons.
	ErrTicketNotToolCall = errors.New("resume ticket does not target a tool call")
	// ErrTicketMissingAwaitingCall: no call awaits.
	ErrTicketMissingAwaitingCall = errors.New("tool batch has no awaiting call")
	// ErrTicketCallMismatch: the awaiting call is another call than the ticket's.
	ErrTicketCallMismatch = errors.New("resume ticket names another call")
	// ErrTicketKindMismatch: the ticket's reason does not map to the committed wait kind.
	ErrTicketKindMismatch = errors.New("resume ticket has another wait kind")
	// ErrTicketCorrelationMismatch: the ticket's correlation is not the committed wait's.
	ErrTicketCorrelationMismatch = errors.New("resume ticket has another correlation")
	// ErrTicketToolMismatch: the ticket's tool id or arguments differ from the call's.
	ErrTicketToolMismatch = errors.New("resume ticket has another tool payload")
)

// DurableToolCall is one call of a batch with its pinned recovery policy, its durable
// phase and the state commands it staged for the publication barrier. Its methods are the
// per-call transitions of reference §2.1 without any batch-level rule (finalization, the
// single-wait rule): services that keep one KV record per call apply them directly and
// enforce the batch rules themselves; [ToolBatch] applies them with those rules.
//
// Every transition first checks that the call is valid ([DurableToolCall.Validate]) and
// fails with [ErrInvalidPersistedState] otherwise; it either succeeds or leaves the call
// unchanged. Values passed in (outputs, commands) are deep-copied. A DurableToolCall is not
// safe for concurrent use.
type DurableToolCall struct {
	Call           ToolCall           `json:"call"`
	RecoveryPolicy ToolRecoveryPolicy `json:"recovery_policy"`
	Phase          ToolCallPhase      `json:"phase"`
	// ResultState holds the tool's state commands, durable but unpublished until the
	// batch crosses the publication barrier. Only terminal calls may hold any.
	ResultState []Command `json:"result_state,omitempty"`
}

// MarkExecuting records that an executor is about to be entered: Requested → Executing{1},
// or a retry Executing{n} → Executing{n+1}. It fails with [ErrAttemptsExhausted] when the
// next attempt would exceed RecoveryPolicy.MaxAttempts, and with [ErrInvalidTransition]
// from any other phase. It must be committed before the executor is entered.
func (c *DurableToolCall) MarkExecuting() error {
	if err := c.Validate(); err != nil {
		return err
	}
	var attempt uint16
	switch c.Phase.Kind {
	case PhaseRequested:
		attempt = 1
	case PhaseExecuting:
		if c.Phase.Attempt == math.MaxUint16 {
			return fmt.Errorf("%w: call %q attempt counter would overflow", ErrAttemptsExhausted, c.Call.CallID)
		}
		attempt = c.Phase.Attempt + 1
	default:
		return c.badTransition("mark executing", "Requested or Executing")
	}
	if attempt > c.RecoveryPolicy.MaxAttempts {
		return fmt.Errorf("%w: call %q attempt %d exceeds max_attempts %d", ErrAttemptsExhausted, c.Call.CallID, attempt, c.RecoveryPolicy.MaxAttempts)
	}
	c.Phase = ExecutingPhase(attempt)
	return nil
}

// ResumeExecuting moves an Awaiting call into execution (Executing{1}: the attempt budget
// restarts per executor episode) when both kind and correlationID equal the committed
// wait; a stale or foreign approval fails with [ErrWaitMismatch] and changes nothing. Any
// other phase fails with [ErrInvalidTransition].
func (c *DurableToolCall) ResumeExecuting(kind ToolWaitKind, correlationID string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Phase.Kind != PhaseAwaiting {
		return c.badTransition("resume executing", "Awaiting")
	}
	w := c.Phase.Wait
	if w.Kind != kind || w.CorrelationID != correlationID {
		return fmt.Errorf("%w: call %q awaits %s %q, resume names %s %q", ErrWaitMismatch, c.Call.CallID, w.Kind, w.CorrelationID, kind, correlationID)
	}
	// Validate guarantees max_attempts ≥ 1, so attempt 1 is always within budget.
	c.Phase = ExecutingPhase(1)
	return nil
}

// MarkAwaiting parks a Requested or Executing call on a durable wait. An empty correlation
// fails with [ErrEmptyWaitCorrelation], an unknown kind or any other phase with
// [ErrInvalidTransition]. The single-wait rule is the batch's: see
// [ToolBatch.MarkAwaiting].
func (c *DurableToolCall) MarkAwaiting(kind ToolWaitKind, correlationID string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Phase.Kind != PhaseRequested && c.Phase.Kind != PhaseExecuting {
		return c.badTransition("mark awaiting", "Requested or Executing")
	}
	if correlationID == "" {
		return fmt.Errorf("%w: call %q", ErrEmptyWaitCorrelation, c.Call.CallID)
	}
	if !validWaitKind(kind) {
		return fmt.Errorf("%w: call %q: unknown wait kind %q", ErrInvalidTransition, c.Call.CallID, kind)
	}
	c.Phase = AwaitingPhase(kind, correlationID)
	return nil
}

// Complete records the terminal output of an Executing or Awaiting call. out.CallID must be
// this call's id ([ErrUnknownCall] otherwise). Completing an already Completed call with an
// equal output (deep equality, JSON compared canonically) is an idempotent no-op, so a
// redelivered result is harmless; a different output, or any other phase, fails with
// [ErrInvalidTransition].
func (c *DurableToolCall) Complete(out ToolOutput) error {
	return c.complete(out, "complete", "Executing or Awaiting", PhaseExecuting, PhaseAwaiting)
}

// CompleteImmediate records the output of a Requested call that the runtime answered
// without entering an executor (a block, a gate-supplied result, an invalid policy). Like
// [DurableToolCall.Complete] it is idempotent on an equal output.
func (c *DurableToolCall) CompleteImmediate(out ToolOutput) error {
	return c.complete(out, "complete immediately", "Requested", PhaseRequested)
}

func (c *DurableToolCall) complete(out ToolOutput, op, want string, from ...PhaseKind) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if out.CallID != c.Call.CallID {
		return fmt.Errorf("%w: output for call %q offered to call %q", ErrUnknownCall, out.CallID, c.Call.CallID)
	}
	if c.Phase.Kind == PhaseCompleted && batchOutputEqual(*c.Phase.Output, out) {
		return nil
	}
	for _, k := range from {
		if c.Phase.Kind == k {
			c.Phase = CompletedPhase(out)
			return nil
		}
	}
	if c.Phase.Kind == PhaseCompleted {
		return fmt.Errorf("%w: call %q is already Completed with a different output", ErrInvalidTransition, c.Call.CallID)
	}
	return c.badTransition(op, want)
}

// MarkIndeterminate records that the call's external outcome cannot be determined: from any
// phase except Completed (an Indeterminate call takes the new reason). A Completed call
// fails with [ErrInvalidTransition]: a committed result is never downgraded.
func (c *DurableToolCall) MarkIndeterminate(reason string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Phase.Kind == PhaseCompleted {
		return c.badTransition("mark indeterminate", "any phase but Completed")
	}
	c.Phase = IndeterminatePhase(reason)
	return nil
}

// SetResultState replaces the staged state commands of a terminal call; a non-terminal
// call fails with [ErrInvalidTransition] because nothing may be staged before a result.
func (c *DurableToolCall) SetResultState(cmds []Command) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if !c.Phase.IsTerminal() {
		return c.badTransition("stage result state", "Completed or Indeterminate")
	}
	c.ResultState = batchCloneCommands(cmds)
	return nil
}

// Output returns the model-visible result of a terminal call: the committed output of a
// Completed call, or for an Indeterminate call an error output with the text
// "tool outcome is indeterminate: {reason}". It returns false for a non-terminal call.
// The result is a copy.
func (c *DurableToolCall) Output() (ToolOutput, bool) {
	switch c.Phase.Kind {
	case PhaseCompleted:
		if c.Phase.Output == nil {
			return ToolOutput{}, false
		}
		return batchCloneOutput(*c.Phase.Output), true
	case PhaseIndeterminate:
		return batchErrorOutput(c.Call.CallID, "tool outcome is indeterminate: "+c.Phase.Reason), true
	}
	return ToolOutput{}, false
}

// Validate checks every invariant of reference §2.2 that one call carries on its own: a
// valid call id, a valid recovery policy, a well-formed phase, an Executing attempt within
// 1..max_attempts, a non-empty wait correlation, a Completed output for this very call, and
// staged state only on a terminal call. Errors wrap [ErrInvalidPersistedState] (and
// [ErrInvalidID]) or [ErrEmptyWaitCorrelation].
func (c *DurableToolCall) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil call", ErrInvalidPersistedState)
	}
	if err := ValidateID("call_id", c.Call.CallID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPersistedState, err)
	}
	if msg := batchPolicyProblem(c.RecoveryPolicy); msg != "" {
		return fmt.Errorf("%w: call %q %s", ErrInvalidPersistedState, c.Call.CallID, msg)
	}
	if err := c.Phase.check(); err != nil {
		return fmt.Errorf("call %q: %w", c.Call.CallID, err)
	}
	switch c.Phase.Kind {
	case PhaseExecuting:
		if c.Phase.Attempt > c.RecoveryPolicy.MaxAttempts {
			return fmt.Errorf("%w: call %q has an out-of-budget execution attempt %d (max_attempts %d)", ErrInvalidPersistedState, c.Call.CallID, c.Phase.Attempt, c.RecoveryPolicy.MaxAttempts)
		}
	case PhaseCompleted:
		if c.Phase.Output.CallID != c.Call.CallID {
			return fmt.Errorf("%w: call %q contains another call's output (%q)", ErrInvalidPersistedState, c.Call.CallID, c.Phase.Output.CallID)
		}
	}
	if len(c.ResultState) > 0 && !c.Phase.IsTerminal() {
		return fmt.Errorf("%w: call %q stages result state before a terminal result", ErrInvalidPersistedState, c.Call.CallID)
	}
	return nil
}

// UnmarshalJSON decodes a call record strictly (fields call, recovery_policy and phase
// required, result_state optional, nothing else) and validates it, so an invalid record
// never becomes a value a service could act on.
func (c *DurableToolCall) UnmarshalJSON(b []byte) error {
	f, err := batchDecodeObject(b, []string{"call", "recovery_policy", "phase"}, []string{"result_state"})
	if err != nil {
		return fmt.Errorf("contracts: decode durable tool call: %w", err)
	}
	var next DurableToolCall
	if err := batchDecodeValue(f["call"], &next.Call); err != nil {
		return fmt.Errorf("contracts: decode durable tool call: %w: call: %w", ErrInvalidPersistedState, err)
	}
	if err := batchDecodeValue(f["recovery_policy"], &next.RecoveryPolicy); err != nil {
		return fmt.Errorf("contracts: decode durable tool call: %w: recovery_policy: %w", ErrInvalidPersistedState, err)
	}
	if err := json.Unmarshal(f["phase"], &next.Phase); err != nil {
		return fmt.Errorf("contracts: decode durable tool call %q: %w", next.Call.CallID, err)
	}
	if raw, ok := f["result_state"]; ok {
		if err := json.Unmarshal(raw, &next.ResultState); err != nil {
			return fmt.Errorf("contracts: decode durable tool call: %w: result_state: %w", ErrInvalidPersistedState, err)
		}
		if len(next.ResultState) == 0 {
			next.ResultState = nil
		}
	}
	if err := next.Validate(); err != nil {
		return fmt.Errorf("contracts: decode durable tool call: %w", err)
	}
	*c = next
	return nil
}

func (c *DurableToolCall) badTransition(op, want string) error {
	return fmt.Errorf("%w: cannot %s call %q in phase %s (needs %s)", ErrInvalidTransition, op, c.Call.CallID, c.Phase.Kind, want)
}

// batchPolicyProblem describes why p cannot be pinned on a call, or returns "".
func batchPolicyProblem(p ToolRecoveryPolicy) string {
	switch p.Mode {
	case ModeNeverReplay, ModeReplaySafe, ModeIdempotent, ModeDurableRequest:
	default:
		return fmt.Sprintf("has an unknown recovery mode %q", p.Mode)
	}
	if p.MaxAttempts == 0 {
		return "has max_attempts 0"
	}
	return ""
}

// ToolBatchPhase is the lifecycle of a [ToolBatch]: open while calls are gated and
// executed, finalized once every call is terminal and the results may be published.
type ToolBatchPhase string

const (
	// ToolBatchOpen: calls may still move.
	ToolBatchOpen ToolBatchPhase = "open"
	// ToolBatchFinalized: every call is terminal; every mutator fails with
	// [ErrBatchFinalized]. A finalized batch is kept as crash evidence.
	ToolBatchFinalized ToolBatchPhase = "finalized"
)

// ToolBatch is the validated aggregate of one model-emitted batch: a non-empty list of
// uniquely identified calls of one run and step, in model order. Its fields are private so
// it can only be built valid, by [NewToolBatch] or by decoding (which validates and fails
// closed), and only moved by its transitions, which keep it valid: a finalized batch is
// never reopened, at most one call awaits, and nothing is staged before a terminal result.
//
// Every mutator either succeeds or leaves the batch unchanged. A ToolBatch is not safe for
// concurrent use, and must not be copied by value (the copies would share their calls):
// use [ToolBatch.Clone].
type ToolBatch struct {
	id    string
	runID string
	step  int64
	calls []DurableToolCall
	phase ToolBatchPhase
}

// NewToolBatch creates the open batch of step of runID (the original for_step). Every
// call must be a fresh Requested call with a valid call id, a valid recovery policy and no
// staged state ([ErrInvalidCall]); there must be at least one ([ErrEmptyBatch]) and their
// ids must be unique ([ErrDuplicateCall]). An empty run id fails with [ErrEmptyRunID], an
// invalid one or a negative step with [ErrInvalidBatchID]. The calls are deep-copied.
func NewToolBatch(runID string, step int64, calls []DurableToolCall) (*ToolBatch, error) {
	if strings.TrimSpace(runID) == "" {
		return nil, ErrEmptyRunID
	}
	if err := ValidateID("run_id", runID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBatchID, err)
	}
	if step < 0 {
		return nil, fmt.Errorf("%w: step %d is negative", ErrInvalidBatchID, step)
	}
	if len(calls) == 0 {
		return nil, ErrEmptyBatch
	}
	seen := make(map[string]bool, len(calls))
	owned := make([]DurableToolCall, len(calls))
	for i, c := range calls {
		if err := ValidateID("call_id", c.Call.CallID); err != nil {
			return nil, fmt.Errorf("%w: calls[%d]: %w", ErrInvalidCall, i, err)
		}
		if msg := batchPolicyProblem(c.RecoveryPolicy); msg != "" {
			return nil, fmt.Errorf("%w: call %q %s", ErrInvalidCall, c.Call.CallID, msg)
		}
		if c.Phase.Kind != PhaseRequested {
			return nil, fmt.Errorf("%w: call %q is %q; a new batch holds only Requested calls", ErrInvalidCall, c.Call.CallID, c.Phase.Kind)
		}
		if err := c.Phase.check(); err != nil {
			return nil, fmt.Errorf("%w: call %q: %v", ErrInvalidCall, c.Call.CallID, err)
		}
		if len(c.ResultState) > 0 {
			return nil, fmt.Errorf("%w: call %q stages result state before any result", ErrInvalidCall, c.Call.CallID)
		}
		if seen[c.Call.CallID] {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateCall, c.Call.CallID)
		}
		seen[c.Call.CallID] = true
		owned[i] = batchCloneCall(c)
		owned[i].ResultState = nil
	}
	return &ToolBatch{id: BatchID(runID, step), runID: runID, step: step, calls: owned, phase: ToolBatchOpen}, nil
}

// ID returns the derived batch id "tool-batch:{run_id}:{step}".
func (b *ToolBatch) ID() string { return b.id }

// RunID returns the run the batch belongs to.
func (b *ToolBatch) RunID() string { return b.runID }

// Step returns the step of the run the batch was emitted in.
func (b *ToolBatch) Step() int64 { return b.step }

// Phase returns whether the batch is open or finalized.
func (b *ToolBatch) Phase() ToolBatchPhase { return b.phase }

// OperationID returns the durable operation id "{batch_id}:{call_id}" of callID in this
// batch, the key of every exactly-once check of that call. It equals
// [OperationID](RunID(), Step(), callID) and does not check that the call exists.
func (b *ToolBatch) OperationID(callID string) string { return b.id + ":" + callID }

// Calls returns a deep copy of the calls in model order.
func (b *ToolBatch) Calls() []DurableToolCall {
	out := make([]DurableToolCall, len(b.calls))
	for i, c := range b.calls {
		out[i] = batchCloneCall(c)
	}
	return out
}

// Call returns a deep copy of the call with callID.
func (b *ToolBatch) Call(callID string) (DurableToolCall, bool) {
	if i := b.index(callID); i >= 0 {
		return batchCloneCall(b.calls[i]), true
	}
	return DurableToolCall{}, false
}

// Awaiting returns a deep copy of the call that awaits, if any (at most one does).
func (b *ToolBatch) Awaiting() (DurableToolCall, bool) {
	for _, c := range b.calls {
		if c.Phase.Kind == PhaseAwaiting {
			return batchCloneCall(c), true
		}
	}
	return DurableToolCall{}, false
}

// IsComplete reports whether every call is terminal, the precondition of
// [ToolBatch.Finalize].
func (b *ToolBatch) IsComplete() bool {
	for _, c := range b.calls {
		if !c.Phase.IsTerminal() {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of b that shares nothing with it.
func (b *ToolBatch) Clone() *ToolBatch {
	cp := *b
	cp.calls = b.Calls()
	return &cp
}

// MarkExecuting applies [DurableToolCall.MarkExecuting] to callID.
func (b *ToolBatch) MarkExecuting(callID string) error {
	return b.mutate(callID, (*DurableToolCall).MarkExecuting)
}

// ResumeExecuting applies [DurableToolCall.ResumeExecuting] to callID: only the exact
// committed wait (kind and correlation) enters execution.
func (b *ToolBatch) ResumeExecuting(callID string, kind ToolWaitKind, correlationID string) error {
	return b.mutate(callID, func(c *DurableToolCall) error { return c.ResumeExecuting(kind, correlationID) })
}

// MarkAwaiting applies [DurableToolCall.MarkAwaiting] to callID, refusing with
// [ErrMultipleAwaitingCalls] while another call awaits: a run owns at most one ticket, so
// its batch owns at most one wait.
func (b *ToolBatch) MarkAwaiting(callID string, kind ToolWaitKind, correlationID string) error {
	if err := b.ensureOpen(); err != nil {
		return err
	}
	if b.index(callID) < 0 {
		return fmt.Errorf("%w: %q", ErrUnknownCall, callID)
	}
	for _, c := range b.calls {
		if c.Call.CallID != callID && c.Phase.Kind == PhaseAwaiting {
			return fmt.Errorf("%w: call %q already awaits", ErrMultipleAwaitingCalls, c.Call.CallID)
		}
	}
	return b.mutate(callID, func(c *DurableToolCall) error { return c.MarkAwaiting(kind, correlationID) })
}

// Complete applies [DurableToolCall.Complete] to the call named by out.CallID.
func (b *ToolBatch) Complete(out ToolOutput) error {
	return b.mutate(out.CallID, func(c *DurableToolCall) error { return c.Complete(out) })
}

// CompleteImmediate applies [DurableToolCall.CompleteImmediate] to the call named by
// out.CallID.
func (b *ToolBatch) CompleteImmediate(out ToolOutput) error {
	return b.mutate(out.CallID, func(c *DurableToolCall) error { return c.CompleteImmediate(out) })
}

// MarkIndeterminate applies [DurableToolCall.MarkIndeterminate] to callID.
func (b *ToolBatch) MarkIndeterminate(callID, reason string) error {
	return b.mutate(callID, func(c *DurableToolCall) error { return c.MarkIndeterminate(reason) })
}

// SetResultState applies [DurableToolCall.SetResultState] to callID.
func (b *ToolBatch) SetResultState(callID string, cmds []Command) error {
	return b.mutate(callID, func(c *DurableToolCall) error { return c.SetResultState(cmds) })
}

// Finalize closes the batch for publication once every call is terminal
// ([ErrIncomplete] otherwise). Afterwards every mutator fails with [ErrBatchFinalized].
func (b *ToolBatch) Finalize() error {
	if err := b.ensureOpen(); err != nil {
		return err
	}
	for _, c := range b.calls {
		if !c.Phase.IsTerminal() {
			return fmt.Errorf("%w: call %q is %s", ErrIncomplete, c.Call.CallID, c.Phase.Kind)
		}
	}
	b.phase = ToolBatchFinalized
	return nil
}

// SealOnRunEnd is applied when the owning run ends (cancel, stop, failure): an ended run
// can never resume, so every Requested, Executing or Awaiting call becomes
// Indeterminate{reason} and the batch is finalized; Completed and Indeterminate calls keep
// their results. It returns the ids of the calls it sealed, in model order. On a batch that
// is already finalized it is an idempotent no-op returning no ids. It fails only on a
// batch that was not built by this package ([ErrInvalidPersistedState]).
func (b *ToolBatch) SealOnRunEnd(reason string) ([]string, error) {
	if err := b.checkPhase(); err != nil {
		return nil, err
	}
	if b.phase == ToolBatchFinalized {
		return nil, nil
	}
	var sealed []string
	for i := range b.calls {
		if !b.calls[i].Phase.IsTerminal() {
			b.calls[i].Phase = IndeterminatePhase(reason)
			b.calls[i].ResultState = nil // non-terminal calls hold none; kept explicit
			sealed = append(sealed, b.calls[i].Call.CallID)
		}
	}
	b.phase = ToolBatchFinalized
	return sealed, nil
}

// Outputs returns the model-visible output of every call in model order (see
// [DurableToolCall.Output]). Results publish only at the barrier, so an open batch fails
// with [ErrIncomplete].
func (b *ToolBatch) Outputs() ([]ToolOutput, error) {
	if err := b.checkPhase(); err != nil {
		return nil, err
	}
	if b.phase != ToolBatchFinalized {
		return nil, fmt.Errorf("%w: batch %s is not finalized", ErrIncomplete, b.id)
	}
	outs := make([]ToolOutput, len(b.calls))
	for i := range b.calls {
		out, ok := b.calls[i].Output()
		if !ok {
			return nil, fmt.Errorf("%w: finalized batch holds non-terminal call %q", ErrInvalidPersistedState, b.calls[i].Call.CallID)
		}
		outs[i] = out
	}
	return outs, nil
}

// Validate checks every invariant of reference §2.2: a non-empty run id, an id derived
// from that run, at least one call, unique call ids, every call valid
// ([DurableToolCall.Validate]), at most one awaiting call, and a finalized batch holding
// only terminal calls. It is run on every decode; a batch built and moved by this package
// always passes it.
func (b *ToolBatch) Validate() error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalidPersistedState)
	}
	if strings.TrimSpace(b.runID) == "" {
		return ErrEmptyRunID
	}
	run, step, err := ParseBatchID(b.id)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidBatchID, err)
	}
	if run != b.runID || step != b.step {
		return fmt.Errorf("%w: %q is not a batch of run %q", ErrInvalidBatchID, b.id, b.runID)
	}
	if len(b.calls) == 0 {
		return ErrEmptyBatch
	}
	seen := make(map[string]bool, len(b.calls))
	awaiting := 0
	for i := range b.calls {
		c := &b.calls[i]
		if seen[c.Call.CallID] {
			return fmt.Errorf("%w: %q", ErrDuplicateCall, c.Call.CallID)
		}
		seen[c.Call.CallID] = true
		if err := c.Validate(); err != nil {
			return err
		}
		if c.Phase.Kind == PhaseAwaiting {
			awaiting++
		}
	}
	if awaiting > 1 {
		return fmt.Errorf("%w: %d calls await", ErrMultipleAwaitingCalls, awaiting)
	}
	if err := b.checkPhase(); err != nil {
		return err
	}
	if b.phase == ToolBatchFinalized && !b.IsComplete() {
		return fmt.Errorf("%w: a finalized batch contains a non-terminal call", ErrInvalidPersistedState)
	}
	return nil
}

// toolBatchWire is the JSON form of a [ToolBatch].
type toolBatchWire struct {
	ID    string            `json:"id"`
	RunID string            `json:"run_id"`
	Calls []DurableToolCall `json:"calls"`
	Phase ToolBatchPhase    `json:"phase"`
}

// MarshalJSON writes {"id","run_id","calls","phase"}. It refuses an invalid batch, so
// everything it writes decodes again. It has a value receiver so that a ToolBatch inside
// another value encodes the same way as a *ToolBatch.
func (b ToolBatch) MarshalJSON() ([]byte, error) {
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("contracts: encode tool batch: %w", err)
	}
	return json.Marshal(toolBatchWire{ID: b.id, RunID: b.runID, Calls: b.calls, Phase: b.phase})
}

// UnmarshalJSON decodes a persisted batch strictly (exactly the fields id, run_id, calls
// and phase) and validates it ([ToolBatch.Validate]). It fails closed: every error wraps
// [ErrInvalidPersistedState] together with the specific kind where there is one, and b is
// left unchanged, so recovery never acts on corrupted state.
func (b *ToolBatch) UnmarshalJSON(data []byte) error {
	fail := func(err error) error {
		if !errors.Is(err, ErrInvalidPersistedState) {
			err = fmt.Errorf("%w: %w", ErrInvalidPersistedState, err)
		}
		return fmt.Errorf("contracts: decode tool batch: %w", err)
	}
	f, err := batchDecodeObject(data, []string{"id", "run_id", "calls", "phase"}, nil)
	if err != nil {
		return fail(err)
	}
	var next ToolBatch
	if err := batchDecodeValue(f["id"], &next.id); err != nil {
		return fail(fmt.Errorf("id: %w", err))
	}
	if err := batchDecodeValue(f["run_id"], &next.runID); err != nil {
		return fail(fmt.Errorf("run_id: %w", err))
	}
	if err := batchDecodeValue(f["phase"], &next.phase); err != nil {
		return fail(fmt.Errorf("phase: %w", err))
	}
	var raws []json.RawMessage
	if err := batchDecodeValue(f["calls"], &raws); err != nil {
		return fail(fmt.Errorf("calls: %w", err))
	}
	next.calls = make([]DurableToolCall, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &next.calls[i]); err != nil {
			return fail(fmt.Errorf("calls[%d]: %w", i, err))
		}
	}
	if strings.TrimSpace(next.runID) == "" {
		return fail(ErrEmptyRunID)
	}
	_, step, err := ParseBatchID(next.id)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrInvalidBatchID, err))
	}
	next.step = step
	if err := next.Validate(); err != nil {
		return fail(err)
	}
	*b = next
	return nil
}

func (b *ToolBatch) index(callID string) int {
	for i := range b.calls {
		if b.calls[i].Call.CallID == callID {
			return i
		}
	}
	return -1
}

// checkPhase refuses a batch that was not built by this package (the zero value).
func (b *ToolBatch) checkPhase() error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalidPersistedState)
	}
	switch b.phase {
	case ToolBatchOpen, ToolBatchFinalized:
		return nil
	}
	return fmt.Errorf("%w: unknown batch phase %q (build batches with NewToolBatch)", ErrInvalidPersistedState, b.phase)
}

func (b *ToolBatch) ensureOpen() error {
	if err := b.checkPhase(); err != nil {
		return err
	}
	if b.phase == ToolBatchFinalized {
		return fmt.Errorf("%w: %s", ErrBatchFinalized, b.id)
	}
	return nil
}

// mutate applies op to a copy of the call and stores the copy only if op succeeds, so a
// failed transition leaves the batch untouched. Call-level transitions never write through
// the pointers they find in a phase, which makes the shallow copy sufficient.
func (b *ToolBatch) mutate(callID string, op func(*DurableToolCall) error) error {
	if err := b.ensureOpen(); err != nil {
		return err
	}
	i := b.index(callID)
	if i < 0 {
		return fmt.Errorf("%w: %q", ErrUnknownCall, callID)
	}
	c := b.calls[i]
	if err := op(&c); err != nil {
		return err
	}
	b.calls[i] = c
	return nil
}

// WaitKindForReason maps a ticket reason to the wait kind the parked call commits:
// permission → tool_permission, client_execution → external_result, scheduled_action →
// scheduled_action. It returns "" for any other reason, which no wait kind matches.
func WaitKindForReason(r TicketReason) ToolWaitKind {
	switch r {
	case ReasonPermission:
		return WaitToolPermission
	case ReasonClientExecution:
		return WaitExternalResult
	case ReasonScheduledAction:
		return WaitScheduledAction
	}
	return ""
}

// ReasonForWaitKind is the inverse of [WaitKindForReason]. It returns false for
// delegation waits, which have no ticket reason in awaken, and for unknown kinds.
func ReasonForWaitKind(k ToolWaitKind) (TicketReason, bool) {
	switch k {
	case WaitToolPermission:
		return ReasonPermission, true
	case WaitExternalResult:
		return ReasonClientExecution, true
	case WaitScheduledAction:
		return ReasonScheduledAction, true
	}
	return "", false
}

// ValidateAwaitingTicket checks that this batch is exactly the execution truth a committed
// ticket names (reference §2.5), in this order: the batch is open ([ErrTicketFinalized]),
// the ticket's run ([ErrTicketRunMismatch]), thread — threadID is the run's thread, which
// the batch does not record ([ErrTicketThreadMismatch]) — and batch
// ([ErrTicketBatchMismatch]) match, then [ValidateCallAwaitsTicket] on the awaiting call
// ([ErrTicketNotToolCall], [ErrTicketMissingAwaitingCall], call, kind, correlation, tool).
// It never changes the batch. Resume, cancellation and reply admission run it before any
// state change.
func (b *ToolBatch) ValidateAwaitingTicket(threadID string, t ResumeTicket) error {
	if err := b.checkPhase(); err != nil {
		return err
	}
	if b.phase == ToolBatchFinalized {
		return fmt.Errorf("%w: %s", ErrTicketFinalized, b.id)
	}
	if t.RunID != b.runID {
		return fmt.Errorf("%w: ticket run %q, batch run %q", ErrTicketRunMismatch, t.RunID, b.runID)
	}
	if t.ThreadID != threadID {
		return fmt.Errorf("%w: ticket thread %q, run thread %q", ErrTicketThreadMismatch, t.ThreadID, threadID)
	}
	if t.BatchID != b.id {
		return fmt.Errorf("%w: ticket batch %q, batch %q", ErrTicketBatchMismatch, t.BatchID, b.id)
	}
	if WaitKindForReason(t.Reason) == "" {
		return fmt.Errorf("%w: reason %q", ErrTicketNotToolCall, t.Reason)
	}
	for i := range b.calls {
		if b.calls[i].Phase.Kind == PhaseAwaiting {
			return ValidateCallAwaitsTicket(b.calls[i], t)
		}
	}
	return fmt.Errorf("%w: batch %s", ErrTicketMissingAwaitingCall, b.id)
}

// ValidateCallAwaitsTicket is the call-level half of [ToolBatch.ValidateAwaitingTicket] for
// a service that holds one call record: the ticket's reason is a tool-call reason
// ([ErrTicketNotToolCall]), c awaits ([ErrTicketMissingAwaitingCall]), and c's call id
// ([ErrTicketCallMismatch]), wait kind ↔ reason ([ErrTicketKindMismatch]), correlation
// ([ErrTicketCorrelationMismatch]), tool id and arguments — compared as canonical JSON —
// ([ErrTicketToolMismatch]) equal the ticket's, in that order. The caller must check the
// run, thread and batch axes itself.
func ValidateCallAwaitsTicket(c DurableToolCall, t ResumeTicket) error {
	want := WaitKindForReason(t.Reason)
	if want == "" {
		return fmt.Errorf("%w: reason %q", ErrTicketNotToolCall, t.Reason)
	}
	if c.Phase.Kind != PhaseAwaiting || c.Phase.Wait == nil {
		return fmt.Errorf("%w: call %q is %s", ErrTicketMissingAwaitingCall, c.Call.CallID, c.Phase.Kind)
	}
	if c.Call.CallID != t.CallID {
		return fmt.Errorf("%w: ticket call %q, awaiting call %q", ErrTicketCallMismatch, t.CallID, c.Call.CallID)
	}
	if c.Phase.Wait.Kind != want {
		return fmt.Errorf("%w: ticket reason %s wants %s, call %q awaits %s", ErrTicketKindMismatch, t.Reason, want, c.Call.CallID, c.Phase.Wait.Kind)
	}
	if c.Phase.Wait.CorrelationID != t.CorrelationID {
		return fmt.Errorf("%w: ticket %q, call %q awaits %q", ErrTicketCorrelationMismatch, t.CorrelationID, c.Call.CallID, c.Phase.Wait.CorrelationID)
	}
	if c.Call.ToolID != t.ToolID {
		return fmt.Errorf("%w: ticket tool %q, call %q is tool %q", ErrTicketToolMismatch, t.ToolID, c.Call.CallID, c.Call.ToolID)
	}
	if !batchJSONEqual(c.Call.Arguments, t.Arguments) {
		return fmt.Errorf("%w: call %q: ticket arguments differ from the committed call", ErrTicketToolMismatch, c.Call.CallID)
	}
	return nil
}

// batchErrorOutput is a model-visible error output with one text block (the original
// ToolOutput::error).
func batchErrorOutput(callID, text string) ToolOutput {
	return ToolOutput{CallID: callID, Content: []ContentBlock{{Type: BlockText, Text: text}}, IsError: true}
}

// Deep copies. They keep the nil/empty distinction of slices so a copy encodes exactly
// like its original.

func batchCloneCall(c DurableToolCall) DurableToolCall {
	c.Call.Arguments = batchCloneRaw(c.Call.Arguments)
	if c.Phase.Wait != nil {
		w := *c.Phase.Wait
		c.Phase.Wait = &w
	}
	if c.Phase.Output != nil {
		o := batchCloneOutput(*c.Phase.Output)
		c.Phase.Output = &o
	}
	c.ResultState = batchCloneCommands(c.ResultState)
	return c
}

func batchCloneOutput(o ToolOutput) ToolOutput {
	o.Content = batchCloneBlocks(o.Content)
	o.State = batchCloneCommands(o.State)
	return o
}

func batchCloneBlocks(bs []ContentBlock) []ContentBlock {
	if bs == nil {
		return nil
	}
	out := make([]ContentBlock, len(bs))
	for i, b := range bs {
		if b.Source != nil {
			s := *b.Source
			b.Source = &s
		}
		b.Input = batchCloneRaw(b.Input)
		b.Content = batchCloneBlocks(b.Content)
		out[i] = b
	}
	return out
}

func batchCloneCommands(cs []Command) []Command {
	if cs == nil {
		return nil
	}
	out := make([]Command, len(cs))
	for i, c := range cs {
		c.Action.Value = batchCloneRaw(c.Action.Value)
		out[i] = c
	}
	return out
}

func batchCloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage{}, r...)
}

// Equality. "Equal output" is deep equality of every field, with raw JSON compared
// canonically (key order, whitespace and number spelling do not matter) and a nil slice
// equal to an empty one, as in the original where both are the same Vec.

func batchOutputEqual(a, b ToolOutput) bool {
	return a.CallID == b.CallID && a.IsError == b.IsError &&
		batchBlocksEqual(a.Content, b.Content) && batchCommandsEqual(a.State, b.State)
}

func batchBlocksEqual(a, b []ContentBlock) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Type != y.Type || x.Text != y.Text || x.ID != y.ID || x.Name != y.Name || x.ToolUseID != y.ToolUseID {
			return false
		}
		if (x.Source == nil) != (y.Source == nil) || (x.Source != nil && *x.Source != *y.Source) {
			return false
		}
		if !batchOptionalJSONEqual(x.Input, y.Input) || !batchBlocksEqual(x.Content, y.Content) {
			return false
		}
	}
	return true
}

func batchCommandsEqual(a, b []Command) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Key != y.Key || x.Scope != y.Scope || x.Merge != y.Merge || x.RunID != y.RunID || x.Action.Kind != y.Action.Kind {
			return false
		}
		if !batchOptionalJSONEqual(x.Action.Value, y.Action.Value) {
			return false
		}
	}
	return true
}

// batchOptionalJSONEqual compares an omitempty raw field: absent equals only absent.
func batchOptionalJSONEqual(a, b json.RawMessage) bool {
	if (len(a) == 0) != (len(b) == 0) {
		return false
	}
	return batchJSONEqual(a, b)
}

// batchJSONEqual reports whether a and b are the same JSON value: objects compare by key
// set (order-free), arrays element-wise, numbers by exact decimal value (1, 1.0 and 1e0
// are equal; no float rounding), strings after unescaping. Empty input counts as null.
// If either side is not valid JSON, only byte-identical inputs are equal.
func batchJSONEqual(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 {
		a = json.RawMessage("null")
	}
	if len(b) == 0 {
		b = json.RawMessage("null")
	}
	if bytes.Equal(a, b) {
		return true
	}
	va, okA := batchDecodeAny(a)
	vb, okB := batchDecodeAny(b)
	if !okA || !okB {
		return false
	}
	return batchValueEqual(va, vb)
}

func batchDecodeAny(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

func batchValueEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && batchNumberEqual(string(x), string(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !batchValueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !batchValueEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// batchNumberEqual compares two JSON number literals by exact decimal value.
func batchNumberEqual(a, b string) bool {
	if a == b {
		return true
	}
	na, da, ea, okA := batchDecimal(a)
	nb, db, eb, okB := batchDecimal(b)
	if !okA || !okB {
		return false
	}
	return na == nb && da == db && ea == eb
}

// batchDecimal normalises a JSON number literal to sign, significant digits (no leading or
// trailing zeros) and a decimal exponent. Zero normalises to (false, "", 0) whatever its
// spelling. ok is false when the exponent does not fit an int64.
func batchDecimal(s string) (neg bool, digits string, exp int64, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
	}
	if expPart != "" {
		e, err := strconv.ParseInt(expPart, 10, 64)
		if err != nil {
			return false, "", 0, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if exp < math.MinInt64+int64(len(frac)) {
		return false, "", 0, false
	}
	exp -= int64(len(frac))
	digits = strings.TrimLeft(intPart+frac, "0")
	for strings.HasSuffix(digits, "0") {
		if exp == math.MaxInt64 {
			return false, "", 0, false
		}
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" {
		return false, "", 0, true
	}
	return neg, digits, exp, true
}
