package schemas

import (
	"reflect"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// Documents is the one list of schema documents: each is a file of the schemas folder
// derived from a Go type. A new payload or body is one line here (then `make schemas`).
// A named struct type listed here is referenced ($ref) wherever another document uses it;
// any other struct is inlined.
var Documents = []Document{
	// Payloads of the public CloudEvents (the data of each event type).
	{File: "batch_submission.json", Type: typeOf[contracts.BatchSubmission]()},
	{File: "batch_rejected.json", Type: typeOf[contracts.BatchRejected](),
		Enums: map[string]reflect.Type{"code": typeOf[contracts.RejectCode]()}},
	{File: "batch_unchanged.json", Type: typeOf[contracts.BatchUnchanged]()},
	{File: "tool_result_event.json", Type: typeOf[contracts.ToolResultEvent]()},
	{File: "batch_finalized.json", Type: typeOf[contracts.BatchFinalized]()},
	{File: "batch_results.json", Type: typeOf[contracts.BatchResults]()},
	{File: "resume_ticket.json", Type: typeOf[contracts.ResumeTicket]()},
	{File: "resume_command.json", Type: typeOf[contracts.ResumeCommand]()},
	{File: "ticket_resolution.json", Type: typeOf[contracts.TicketResolution]()},
	{File: "agent_event.json", Type: typeOf[contracts.AgentEvent]()},
	{File: "tool_progress.json", Type: typeOf[contracts.ToolProgress]()},
	{File: "audit_record.json", Type: typeOf[contracts.AuditRecord]()},
	{File: "tool_pause_audit.json", Type: typeOf[contracts.ToolPauseAudit]()},
	{File: "mcp_call_audit.json", Type: typeOf[contracts.MCPCallAudit]()},
	{File: "reconcile_audit.json", Type: typeOf[contracts.ReconcileAudit]()},
	{File: "audit_checkpoint.json", Type: typeOf[auditchain.Checkpoint]()},
	{File: "run_cancel.json", Type: typeOf[contracts.RunCancel]()},
	{File: "call_cancel.json", Type: typeOf[contracts.CallCancel]()},
	{File: "call_resolve.json", Type: typeOf[contracts.CallResolve]()},
	{File: "result_corrected.json", Type: typeOf[contracts.ResultCorrected]()},
	{File: "run_ended.json", Type: typeOf[contracts.RunEndedEvent]()},

	// Payloads of the internal work events.
	{File: "exec_request.json", Type: typeOf[contracts.ExecRequest]()},
	{File: "call_output.json", Type: typeOf[contracts.CallOutput]()},
	{File: "ticket_timer.json", Type: typeOf[contracts.TicketTimer]()},

	// Parts shared by several documents.
	{File: "agent_snapshot.json", Type: typeOf[contracts.AgentSnapshot]()},
	{File: "tool_call.json", Type: typeOf[contracts.ToolCall]()},
	{File: "content_block.json", Type: typeOf[contracts.ContentBlock]()},
	{File: "tool_output.json", Type: typeOf[contracts.ToolOutput]()},
	{File: "command.json", Type: typeOf[contracts.Command]()},
	{File: "policy_config.json", Type: typeOf[contracts.PolicyConfig]()},
	{File: "resume_result.json", Type: typeOf[contracts.ResumeResult]()},
	{File: "permission_decision.json", Type: typeOf[contracts.PermissionDecision]()},
	{File: "tool_recovery_policy.json", Type: typeOf[contracts.ToolRecoveryPolicy]()},
	{File: "tool_descriptor.json", Type: typeOf[contracts.ToolDescriptor]()},

	// Request and reply bodies of the api (HTTP routes under /v1 and micro endpoints).
	{File: "api_error.json", Type: typeOf[httpapi.Error]()},
	{File: "api_ticket_list.json", Type: typeOf[httpapi.TicketList]()},
	{File: "api_approve_request.json", Type: typeOf[httpapi.ApproveRequest]()},
	{File: "api_session.json", Type: typeOf[httpapi.Session]()},
	{File: "api_deny_request.json", Type: typeOf[httpapi.DenyRequest]()},
	{File: "api_short_decision.json", Type: typeOf[httpapi.ShortDecision](),
		Enums: map[string]reflect.Type{"decision": typeOf[httpapi.DecisionWord]()}},
	{File: "api_cancel_request.json", Type: typeOf[httpapi.CancelRequest]()},
	{File: "api_cancel_result.json", Type: typeOf[httpapi.CancelResult]()},
	{File: "api_call_cancel_request.json", Type: typeOf[httpapi.CallCancelRequest]()},
	{File: "api_call_cancel_result.json", Type: typeOf[client.CallCancelResult]()},
	{File: "api_call_resolve_request.json", Type: typeOf[httpapi.CallResolveRequest]()},
	{File: "api_call_resolve_result.json", Type: typeOf[client.CallResolveResult]()},
	{File: "api_batch_list.json", Type: typeOf[httpapi.BatchList]()},
	{File: "api_batch_view.json", Type: typeOf[httpapi.BatchView]()},
	{File: "api_batch_accepted.json", Type: typeOf[httpapi.BatchAccepted]()},
	{File: "api_batch_pending.json", Type: typeOf[httpapi.BatchPending]()},
	{File: "api_batch_results.json", Type: typeOf[httpapi.BatchResults]()},
	{File: "tool_catalog.json", Type: typeOf[contracts.ToolCatalog]()},
	{File: "catalog_tool.json", Type: typeOf[contracts.CatalogTool]()},
	{File: "api_tools_request.json", Type: typeOf[contracts.ToolsRequest]()},
	{File: "api_tool_pause_request.json", Type: typeOf[contracts.ToolPauseRequest]()},
	{File: "api_tool_pause_state.json", Type: typeOf[contracts.ToolPauseState]()},
	{File: "tool_pause.json", Type: typeOf[contracts.ToolPause]()},
	{File: "tool_annotations.json", Type: typeOf[contracts.ToolAnnotations]()},
	{File: "api_policy_test_request.json", Type: typeOf[httpapi.PolicyTestRequest]()},
	{File: "api_policy_test_report.json", Type: typeOf[httpapi.PolicyTestReport]()},
	{File: "api_limits_report.json", Type: typeOf[httpapi.LimitsReport]()},

	// The host configuration file (YAML; the schema describes its JSON equivalent). Its
	// loader fills defaults, so no field is required by the schema; config.Load checks the
	// rest.
	{File: "host_config.json", Type: typeOf[config.Config](), TagKey: "yaml", NoRequired: true},
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
