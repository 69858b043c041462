package httpapi

import "strings"

// Micro endpoints. Each is registered under the subject group [MicroGroup]:
// "{prefix}.api.tickets.list" and so on. The group is not "{prefix}" itself because the
// streams capture subjects under "{prefix}.tickets" and "{prefix}.runs": a request on
// "awaken.tickets.list" would be stored in the tickets stream and answered by its
// PubAck, and "awaken.runs.cancel" is the cancellation subject the gate consumes.
const (
	// EndpointTicketsList lists the open tickets. Request body: empty. Reply:
	// {"tickets":[ResumeTicket...]}, oldest first.
	EndpointTicketsList = "tickets.list"
	// EndpointTicketsGet returns one ticket. Request body: the correlation id, as a bare
	// string or {"correlation_id": "…"}. Reply: the ResumeTicket.
	EndpointTicketsGet = "tickets.get"
	// EndpointTicketsResolve answers a ticket. Request body: a complete ResumeCommand
	// (docs/protocol.md §7; any result kind), or the short form {"correlation_id", "decision":
	// "allow"|"deny", "note"|"reason", "arguments"?}. Reply: the gate's TicketResolution.
	// The resolution is recorded as made by [contracts.ActorNATS] ("nats"); the same request on
	// EndpointTicketsResolve + ".{user}" (a subject auth.conf lets only that NATS user
	// publish) is recorded as made by "nats:{user}".
	EndpointTicketsResolve = "tickets.resolve"
	// EndpointTicketsResolveAs is EndpointTicketsResolve for the NATS user {user}: the
	// same requests, recorded as decided by "nats:{user}". Grant each person's NATS user
	// publish on its own subject only ([ResolveAsSubject]).
	EndpointTicketsResolveAs = "tickets.resolve.{user}"
	// EndpointRunsCancel cancels a run and answers once it has ended. Request body:
	// {"run_id","reason"?} or the bare run id. Reply: {"run_id","status":"ended","reason",
	// "ended_at"} (a [CancelResult]).
	EndpointRunsCancel = "runs.cancel"
	// EndpointToolsPause pauses a tool (the kill switch). Request body:
	// {"tool_id","reason"?,"actor"?}. Reply: contracts.ToolPauseState.
	EndpointToolsPause = "tools.pause"
	// EndpointToolsResume lifts a tool's pause. Request body: {"tool_id","actor"?}. Reply:
	// ToolPauseState.
	EndpointToolsResume = "tools.resume"
)

// MicroGroup is the subject prefix of the micro endpoints for a deployment prefix.
func MicroGroup(prefix string) string { return prefix + ".api" }

// MicroSubject is the request subject of endpoint (one of the Endpoint constants).
func MicroSubject(prefix, endpoint string) string { return MicroGroup(prefix) + "." + endpoint }

// ResolveAsSubject is the resolve subject of the NATS user user
// ([EndpointTicketsResolveAs]).
func ResolveAsSubject(prefix, user string) string {
	return MicroSubject(prefix, strings.Replace(EndpointTicketsResolveAs, "{user}", user, 1))
}

// Headers of a micro error reply besides micro's own Nats-Service-Error (the message) and
// Nats-Service-Error-Code (the awaken code, e.g. not_waiting).
const (
	// HeaderStatus carries the HTTP status the same refusal gets on the HTTP api.
	HeaderStatus = "Awaken-Status"
)

// EndpointCallsCancel cancels one call and answers once it ended. Request body:
// {"operation_id","reason"?} or the bare operation id. Reply:
// [github.com/awaken-dev/awaken/pkg/client.CallCancelResult].
const EndpointCallsCancel = "calls.cancel"

// EndpointCallsResolve resolves one indeterminate call and answers once the resolution is
// recorded. Request body: [CallResolveRequest]. Reply:
// [github.com/awaken-dev/awaken/pkg/client.CallResolveResult].
const EndpointCallsResolve = "calls.resolve"

// EndpointToolsList is the tool catalog. Request body: empty or a
// contracts.ToolsRequest ({"format","agent_tools"}). Reply: the catalog in that format.
const EndpointToolsList = "tools.list"
