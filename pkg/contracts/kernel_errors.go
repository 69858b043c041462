package contracts

import "errors"

// This file names the errors of the durable state machine of a batch and its calls: the
// transitions of [CallRecord] and [BatchRecord] and the check of a committed
// [ResumeTicket] against the wait it claims to resume. Every error those return wraps
// exactly one of these kinds, with a detail naming the call or batch; test with
// [errors.Is].
var (
	// ErrUnknownCall: an output names another call than the record it is offered to.
	ErrUnknownCall = errors.New("unknown tool call id")
	// ErrCallMismatch: a call record does not belong to the call of the batch it is keyed
	// under (another index, call id or tool id): a corrupted or foreign record no service
	// may act on.
	ErrCallMismatch = errors.New("call record does not match its batch")
	// ErrBatchFinalized: the batch is already finalized (or published), so it cannot be
	// finalized again and nothing in it may move.
	ErrBatchFinalized = errors.New("tool batch is already finalized")
	// ErrBatchPublished: the batch's results are already on the results stream.
	ErrBatchPublished = errors.New("tool batch is already published")
	// ErrBatchNotHeld: the run record does not hold the batch (another batch of the run
	// replaced it, which happens only once it is finalized and archived).
	ErrBatchNotHeld = errors.New("tool batch is not the run's current batch")
	// ErrInvalidTransition: the phase of the call (or batch) does not admit the operation.
	ErrInvalidTransition = errors.New("invalid tool-call transition")
	// ErrAlreadyDecided: the gate's decision on a call is recorded once; a second one is
	// refused.
	ErrAlreadyDecided = errors.New("tool call is already decided")
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
