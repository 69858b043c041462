package contracts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// This file validates a resume command against the committed ticket it answers. It is pure: the clock is a parameter, so the decision is
// deterministic and replayable, and nothing is mutated — a rejected resume leaves the
// ticket intact.

// ResumeErrorCode is the machine-readable reason a resume command was refused, published as
// the code of io.awaken.ticket.rejected.v1. The codes are the original ResumeError names in
// snake_case; invalid_resume is awaken's, for commands the original's types could not
// express.
type ResumeErrorCode string

const (
	// ResumeNotWaiting: no ticket is open for the correlation (never opened, already
	// resolved, or cleared by cancellation). A second resume after success gets this.
	ResumeNotWaiting ResumeErrorCode = "not_waiting"
	// ResumeCorrelationMismatch: the command names another correlation than the ticket.
	ResumeCorrelationMismatch ResumeErrorCode = "correlation_mismatch"
	// ResumeRunMismatch: the command names another run than the ticket.
	ResumeRunMismatch ResumeErrorCode = "run_mismatch"
	// ResumeThreadMismatch: the command names another thread than the ticket.
	ResumeThreadMismatch ResumeErrorCode = "thread_mismatch"
	// ResumeSnapshotMismatch: the command names another agent snapshot than the ticket.
	ResumeSnapshotMismatch ResumeErrorCode = "snapshot_mismatch"
	// ResumeExpired: the command arrived after the ticket's deadline.
	ResumeExpired ResumeErrorCode = "expired"
	// ResumeResultKindMismatch: the result kind does not answer the ticket's reason
	// (permission and scheduled_action take a permission decision, client_execution a
	// tool result).
	ResumeResultKindMismatch ResumeErrorCode = "result_kind_mismatch"
	// ResumeToolCallMismatch: a tool result names another call than the ticket.
	ResumeToolCallMismatch ResumeErrorCode = "tool_call_mismatch"
	// ResumeInvalid: the command is structurally invalid (no correlation, neither or both
	// results, a decision that is not allow/deny or carries the other decision's text, a
	// deny that carries arguments, an actor over [MaxActorLength] bytes).
	ResumeInvalid ResumeErrorCode = "invalid_resume"
	// ResumeInvalidArguments: an approval's edited arguments are not a JSON object valid
	// against the tool's parameters schema. Nothing is consumed: the ticket stays open.
	ResumeInvalidArguments ResumeErrorCode = "invalid_arguments"
	// ResumeReservedActor: a command on the public resume subject claims an actor that
	// only a door or the gate records ([ReservedActor]: timer, anonymous, nats…). Nothing
	// is consumed: the ticket stays open.
	ResumeReservedActor ResumeErrorCode = "reserved_actor"
	// ResumeDigestMismatch: an approval names an arguments_digest other than the ticket's
	// (it approves other arguments than the call's). Nothing is consumed: the ticket stays
	// open.
	ResumeDigestMismatch ResumeErrorCode = "digest_mismatch"
	// ResumeDuplicateApprover: an actor who already approved a ticket that needs several
	// approvals approves it again; the first approval counts, nothing else changes.
	ResumeDuplicateApprover ResumeErrorCode = "duplicate_approver"
	// ResumeApproverNotAuthenticated: an approval of a ticket that needs several approvals
	// came on the public resume subject, whose actor no door authenticated (a claim cannot
	// count as a distinct person); the ticket stays open. A denial is accepted.
	ResumeApproverNotAuthenticated ResumeErrorCode = "approver_not_authenticated"
	// ResumeEditNeedsSingleApproval: an approval of a ticket that needs several approvals
	// edits the arguments; every approver must approve the same arguments, so only the
	// proposed ones may be approved (deny, and let the model propose others).
	ResumeEditNeedsSingleApproval ResumeErrorCode = "edit_needs_single_approval"
	// ResumeDeferredByLimit: an approval of a scheduled_action ticket that a host rate
	// limit with over: wait opened (the call's window was full, so it was deferred to a
	// later one) before that window starts. Running it then would run it inside the full
	// window: no run, platform or approver lifts a host limit. The ticket stays open and
	// runs at its due_at; a denial is accepted.
	ResumeDeferredByLimit ResumeErrorCode = "deferred_by_limit"
)

// ResolvedApprovalRecorded is the code of the io.awaken.ticket.resolved.v1 answer to an
// approval of a ticket that needs more than one, below the last: the approval was counted
// (TicketResolution.Approvals of ApprovalsRequired) and the ticket stays open. It is an
// answer, not a resolution: nothing ran and nothing was decided.
const ResolvedApprovalRecorded = "approval_recorded"

// MaxActorLength bounds the actor of a resume command.
const MaxActorLength = 256

// The actors the doors and the gate record themselves. A command on the public resume
// subject may claim none of them ([ReservedActor]), so a claim never reads like one.
const (
	// ActorTimer is the actor of a resolution no human made: a scheduled action's due
	// time or an approval's deadline.
	ActorTimer = "timer"
	// ActorSingleToken is the api's actor for a request authenticated by its single
	// --api-token.
	ActorSingleToken = "api-token"
	// ActorAnonymous is the api's actor for an HTTP request when it requires no token.
	ActorAnonymous = "anonymous"
	// ActorNATS is the api's actor for a micro request on the shared resolve subject;
	// "nats:{user}" for one on a per-user subject.
	ActorNATS = "nats"
	// ActorHTTP and ActorMicro are the default actors of a tool pause by each door.
	ActorHTTP  = "http"
	ActorMicro = "micro"
	// claimedPrefix is reserved so that no name reads like the rendering of a claim.
	claimedPrefix = "claimed"
)

// ReservedActor reports whether name is one awaken records for a door or a timer, or
// could be read as one: the single token's "api-token", "anonymous", "timer", "http" and
// "micro", and anything starting with "nats" (the micro doors) or "claimed"
// (case-insensitive, surrounding spaces ignored). No api token may carry such a name, and
// no command on the public resume subject may claim one: neither its whole actor nor the
// actor's first word ("timer (expired)", "nats:admin as bob").
func ReservedActor(name string) bool {
	reserved := func(s string) bool {
		l := strings.ToLower(s)
		switch l {
		case ActorSingleToken, ActorAnonymous, ActorTimer, ActorHTTP, ActorMicro:
			return true
		}
		return strings.HasPrefix(l, ActorNATS) || strings.HasPrefix(l, claimedPrefix)
	}
	t := strings.TrimSpace(name)
	if reserved(t) {
		return true
	}
	f := strings.Fields(t)
	return len(f) > 0 && reserved(f[0])
}

// CheckClaimedActor refuses the actor of a command no door authenticated (one on the
// public resume subject) when it is reserved ([ReservedActor]): an [ErrReservedActor]
// refusal naming it. Any other actor, the empty one included, is recorded as claimed.
func CheckClaimedActor(actor string) error {
	if ReservedActor(actor) {
		return resumeErr(ResumeReservedActor, "actor %q is reserved for the doors that authenticate it and for the gate's timers; "+
			"a command on the public resume subject may not claim it (approve through the api to be recorded as an authenticated actor)", actor)
	}
	return nil
}

// ActorText renders who decided for people: the actor, followed by " (claimed)" when no
// door authenticated it, and "(unnamed, claimed)" for a claim that names nobody.
func ActorText(actor string, claimed bool) string {
	switch {
	case !claimed:
		return actor
	case actor == "":
		return "(unnamed, claimed)"
	}
	return actor + " (claimed)"
}

// ResumeError is a typed refusal of a resume command. Match a kind with errors.Is against
// the sentinels below (matching is by Code, the Message is detail); read the code with
// errors.As.
type ResumeError struct {
	Code    ResumeErrorCode
	Message string
}

// Error renders "code: message".
func (e *ResumeError) Error() string { return string(e.Code) + ": " + e.Message }

// Is reports whether target is a *ResumeError with the same Code, so that
// errors.Is(err, ErrExpired) holds for every expired refusal whatever its message.
func (e *ResumeError) Is(target error) bool {
	t, ok := target.(*ResumeError)
	return ok && e != nil && t != nil && t.Code == e.Code
}

// Sentinels for errors.Is, one per [ResumeErrorCode]. Never compare with ==: returned
// errors carry their own detail.
var (
	// ErrNotWaiting matches every not_waiting refusal.
	ErrNotWaiting = &ResumeError{Code: ResumeNotWaiting, Message: "run is not awaiting (no active ticket)"}
	// ErrCorrelationMismatch matches every correlation_mismatch refusal.
	ErrCorrelationMismatch = &ResumeError{Code: ResumeCorrelationMismatch, Message: "resume correlation does not match the ticket"}
	// ErrRunMismatch matches every run_mismatch refusal.
	ErrRunMismatch = &ResumeError{Code: ResumeRunMismatch, Message: "resume run id does not match the ticket"}
	// ErrThreadMismatch matches every thread_mismatch refusal.
	ErrThreadMismatch = &ResumeError{Code: ResumeThreadMismatch, Message: "resume thread id does not match the ticket"}
	// ErrSnapshotMismatch matches every snapshot_mismatch refusal.
	ErrSnapshotMismatch = &ResumeError{Code: ResumeSnapshotMismatch, Message: "resume snapshot id does not match the ticket"}
	// ErrExpired matches every expired refusal.
	ErrExpired = &ResumeError{Code: ResumeExpired, Message: "resume is past the ticket deadline"}
	// ErrResultKindMismatch matches every result_kind_mismatch refusal.
	ErrResultKindMismatch = &ResumeError{Code: ResumeResultKindMismatch, Message: "resume result kind is incompatible with the committed wait reason"}
	// ErrToolCallMismatch matches every tool_call_mismatch refusal.
	ErrToolCallMismatch = &ResumeError{Code: ResumeToolCallMismatch, Message: "tool result call id does not match the committed ticket"}
	// ErrInvalidResume matches every invalid_resume refusal.
	ErrInvalidResume = &ResumeError{Code: ResumeInvalid, Message: "resume command is structurally invalid"}
	// ErrInvalidEditedArguments matches every invalid_arguments refusal.
	ErrInvalidEditedArguments = &ResumeError{Code: ResumeInvalidArguments, Message: "the approval's edited arguments are invalid"}
	// ErrReservedActor matches every reserved_actor refusal.
	ErrReservedActor = &ResumeError{Code: ResumeReservedActor, Message: "a claimed actor is reserved"}
	// ErrDigestMismatch matches every digest_mismatch refusal.
	ErrDigestMismatch = &ResumeError{Code: ResumeDigestMismatch, Message: "the approval names another arguments digest than the ticket's"}
	// ErrDuplicateApprover matches every duplicate_approver refusal.
	ErrDuplicateApprover = &ResumeError{Code: ResumeDuplicateApprover, Message: "this actor has already approved the ticket"}
	// ErrApproverNotAuthenticated matches every approver_not_authenticated refusal.
	ErrApproverNotAuthenticated = &ResumeError{Code: ResumeApproverNotAuthenticated, Message: "a claimed actor cannot count as one of several approvers"}
	// ErrEditNeedsSingleApproval matches every edit_needs_single_approval refusal.
	ErrEditNeedsSingleApproval = &ResumeError{Code: ResumeEditNeedsSingleApproval, Message: "a ticket that needs several approvals cannot be approved with edited arguments"}
	// ErrDeferredByLimit matches every deferred_by_limit refusal.
	ErrDeferredByLimit = &ResumeError{Code: ResumeDeferredByLimit, Message: "a call a rate limit deferred cannot be approved before its window"}
)

func resumeErr(code ResumeErrorCode, format string, args ...any) *ResumeError {
	return &ResumeError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Validate checks the structure of c, independent of any ticket: a non-empty correlation
// id and exactly one result; a permission decision is "allow" (optionally with a note) or
// "deny" (optionally with a reason), never with the other decision's text. Failures are
// [ErrInvalidResume] refusals.
func (c ResumeCommand) Validate() error {
	if c.CorrelationID == "" {
		return resumeErr(ResumeInvalid, "correlation_id is empty")
	}
	if len(c.Actor) > MaxActorLength {
		return resumeErr(ResumeInvalid, "actor is longer than %d bytes", MaxActorLength)
	}
	r := c.Result
	switch {
	case r.Permission == nil && r.ToolResult == nil:
		return resumeErr(ResumeInvalid, "result carries neither a permission decision nor a tool result")
	case r.Permission != nil && r.ToolResult != nil:
		return resumeErr(ResumeInvalid, "result carries both a permission decision and a tool result")
	case r.Permission != nil:
		switch p := r.Permission; p.Decision {
		case DecisionAllow:
			if p.Reason != "" {
				return resumeErr(ResumeInvalid, "an allow decision carries a note, not a reason")
			}
		case DecisionDeny:
			if p.Note != "" {
				return resumeErr(ResumeInvalid, "a deny decision carries a reason, not a note")
			}
			if p.HasArguments() {
				return resumeErr(ResumeInvalid, "a deny decision carries no arguments")
			}
		default:
			return resumeErr(ResumeInvalid, "permission decision %q is neither %q nor %q", p.Decision, DecisionAllow, DecisionDeny)
		}
	}
	return nil
}

// ValidateResume decides whether cmd may resolve ticket at time now. It returns nil or a
// *[ResumeError], checking in this order:
//
//  1. the command's structure ([ResumeCommand.Validate], invalid_resume) — a command the
//     original's typed form could not even express is refused before any ticket is read;
//  2. a nil ticket: not_waiting;
//  3. correlation, run, thread and snapshot ids, each equal to the ticket's;
//  4. the deadline: now strictly after ticket.Deadline is expired (a ticket without a
//     deadline never expires; now equal to the deadline is still in time);
//  5. the result kind: permission and scheduled_action tickets accept only a permission
//     decision, client_execution tickets only a tool result; any other reason accepts
//     nothing (result_kind_mismatch);
//  6. a tool result's call_id equals the ticket's call (tool_call_mismatch);
//  7. an allow that names an arguments_digest names the ticket's ([ResumeTicket.Digest],
//     digest_mismatch); an allow naming none is accepted (compatibility for this
//     release), a deny is never refused for its digest — denying is always safe;
//  8. on a ticket that needs several approvals ([ResumeTicket.Required] > 1), an allow
//     from an actor who already approved is duplicate_approver ([ApproverKey]).
//
// Whether the actor is authenticated is the gate's to check (it knows the subject), as
// are the edits of a multi-approval ticket.
//
// It reads but never modifies ticket or cmd. The batch-side check
// ([BatchRecord.CheckTicket], [CallRecord.CheckAwaits]) must also pass before any state changes.
func ValidateResume(ticket *ResumeTicket, cmd ResumeCommand, now time.Time) error {
	if err := cmd.Validate(); err != nil {
		return err
	}
	if ticket == nil {
		return resumeErr(ResumeNotWaiting, "no ticket is open for correlation %q", cmd.CorrelationID)
	}
	t := ticket
	if cmd.CorrelationID != t.CorrelationID {
		return resumeErr(ResumeCorrelationMismatch, "resume correlation %q does not match the ticket's %q", cmd.CorrelationID, t.CorrelationID)
	}
	if cmd.RunID != t.RunID {
		return resumeErr(ResumeRunMismatch, "resume run %q does not match the ticket's run %q", cmd.RunID, t.RunID)
	}
	if cmd.ThreadID != t.ThreadID {
		return resumeErr(ResumeThreadMismatch, "resume thread %q does not match the ticket's thread %q", cmd.ThreadID, t.ThreadID)
	}
	if cmd.SnapshotID != t.SnapshotID {
		return resumeErr(ResumeSnapshotMismatch, "resume snapshot %q does not match the ticket's snapshot %q", cmd.SnapshotID, t.SnapshotID)
	}
	if t.Deadline != nil && now.After(*t.Deadline) {
		return resumeErr(ResumeExpired, "resume at %s is past the ticket deadline %s", now.UTC().Format(time.RFC3339Nano), t.Deadline.UTC().Format(time.RFC3339Nano))
	}
	switch t.Reason {
	case ReasonPermission, ReasonScheduledAction:
		if cmd.Result.Permission == nil {
			return resumeErr(ResumeResultKindMismatch, "a %s ticket accepts only a permission decision", t.Reason)
		}
	case ReasonClientExecution:
		if cmd.Result.ToolResult == nil {
			return resumeErr(ResumeResultKindMismatch, "a %s ticket accepts only a tool result", t.Reason)
		}
		if cmd.Result.ToolResult.CallID != t.CallID {
			return resumeErr(ResumeToolCallMismatch, "tool result for call %q does not answer the ticket's call %q", cmd.Result.ToolResult.CallID, t.CallID)
		}
	default:
		return resumeErr(ResumeResultKindMismatch, "ticket reason %q accepts no resume result", t.Reason)
	}
	if p := cmd.Result.Permission; p != nil && p.Decision == DecisionAllow {
		if p.ArgumentsDigest != "" && p.ArgumentsDigest != t.Digest() {
			return resumeErr(ResumeDigestMismatch, "the approval names arguments digest %q, the ticket's arguments have %q; read the ticket again and approve what it shows",
				p.ArgumentsDigest, t.Digest())
		}
		if t.Required() > 1 {
			if a, ok := t.ApprovedBy(cmd.Actor); ok {
				return resumeErr(ResumeDuplicateApprover, "%s already approved this ticket at %s (as %q); it needs %d distinct approvers and has %d",
					ApproverKey(cmd.Actor), a.At.UTC().Format(time.RFC3339), a.Actor, t.Required(), len(t.Approvals))
			}
		}
	}
	return nil
}

// ResumeCommandFromTicket builds the command answering t with result: every identity field
// (correlation, run, thread, snapshot) is copied from the committed ticket, so the caller
// supplies only the answer, and an allow that names no arguments digest names t's — the
// approval is bound to the arguments of the ticket the caller read. result is deep-copied.
func ResumeCommandFromTicket(t ResumeTicket, result ResumeResult) ResumeCommand {
	var r ResumeResult
	if result.Permission != nil {
		p := *result.Permission
		p.Arguments = cloneRaw(p.Arguments)
		if p.Decision == DecisionAllow && p.ArgumentsDigest == "" {
			p.ArgumentsDigest = t.Digest()
		}
		r.Permission = &p
	}
	if result.ToolResult != nil {
		o := batchCloneOutput(*result.ToolResult)
		r.ToolResult = &o
	}
	return ResumeCommand{
		CorrelationID: t.CorrelationID,
		RunID:         t.RunID,
		ThreadID:      t.ThreadID,
		SnapshotID:    t.SnapshotID,
		Result:        r,
	}
}

// EditedArguments returns the arguments an approval edits the call to, or nil when it
// runs the call as proposed: no arguments, or arguments equal (as JSON) to proposed.
func (p *PermissionDecision) EditedArguments(proposed json.RawMessage) json.RawMessage {
	if p == nil || p.Decision != DecisionAllow || !p.HasArguments() || batchJSONEqual(p.Arguments, proposed) {
		return nil
	}
	return cloneRaw(p.Arguments)
}

// HasArguments reports whether p carries arguments: absent, empty and JSON null are none.
func (p *PermissionDecision) HasArguments() bool {
	a := bytes.TrimSpace(p.Arguments)
	return len(a) > 0 && !bytes.Equal(a, []byte("null"))
}

// ArgumentsObject checks that args is one JSON object (what a tool's arguments are) and
// returns it compacted; anything else is an [ErrInvalidEditedArguments] refusal.
func ArgumentsObject(args json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return nil, resumeErr(ResumeInvalidArguments, "arguments must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return nil, resumeErr(ResumeInvalidArguments, "arguments must be a JSON object")
	}
	return buf.Bytes(), nil
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage(nil), r...)
}
