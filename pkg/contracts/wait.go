package contracts

import "fmt"

// This file relates the wait a parked call commits to the ticket that may resume it.

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

// CheckAwaits is the call-level half of [BatchRecord.CheckTicket] for a service that
// holds one call record; call is the submitted call the record belongs to. The ticket's
// reason is a tool-call reason ([ErrTicketNotToolCall]), r awaits
// ([ErrTicketMissingAwaitingCall]), and r's call id ([ErrTicketCallMismatch]), wait kind ↔
// reason ([ErrTicketKindMismatch]), correlation ([ErrTicketCorrelationMismatch]), tool id
// and the call's arguments — compared as canonical JSON — ([ErrTicketToolMismatch]) equal
// the ticket's, in that order. The caller must check the run, thread and batch axes
// itself. It changes nothing.
func (r *CallRecord) CheckAwaits(call ToolCall, t ResumeTicket) error {
	want := WaitKindForReason(t.Reason)
	if want == "" {
		return fmt.Errorf("%w: reason %q", ErrTicketNotToolCall, t.Reason)
	}
	if r.Phase.Kind != PhaseAwaiting || r.Phase.Wait == nil {
		return fmt.Errorf("%w: call %q is %s", ErrTicketMissingAwaitingCall, r.CallID, r.Phase.Kind)
	}
	if r.CallID != t.CallID {
		return fmt.Errorf("%w: ticket call %q, awaiting call %q", ErrTicketCallMismatch, t.CallID, r.CallID)
	}
	if r.Phase.Wait.Kind != want {
		return fmt.Errorf("%w: ticket reason %s wants %s, call %q awaits %s", ErrTicketKindMismatch, t.Reason, want, r.CallID, r.Phase.Wait.Kind)
	}
	if r.Phase.Wait.CorrelationID != t.CorrelationID {
		return fmt.Errorf("%w: ticket %q, call %q awaits %q", ErrTicketCorrelationMismatch, t.CorrelationID, r.CallID, r.Phase.Wait.CorrelationID)
	}
	if r.ToolID != t.ToolID {
		return fmt.Errorf("%w: ticket tool %q, call %q is tool %q", ErrTicketToolMismatch, t.ToolID, r.CallID, r.ToolID)
	}
	if !batchJSONEqual(call.Arguments, t.Arguments) {
		return fmt.Errorf("%w: call %q: ticket arguments differ from the committed call", ErrTicketToolMismatch, r.CallID)
	}
	return nil
}
