package httpapi

// Role is one right a token may carry.
type Role string

const (
	// RoleViewer reads: tickets, batches, results, the event stream, the tool catalog,
	// stored outputs.
	RoleViewer Role = "viewer"
	// RoleApprover approves and denies tickets.
	RoleApprover Role = "approver"
	// RoleOperator pauses and resumes tools (the kill switch) and cancels runs.
	RoleOperator Role = "operator"
	// RoleSubmitter submits batches (the batch door) and reads what a platform loop needs:
	// results, the tool catalog and stored outputs.
	RoleSubmitter Role = "submitter"
)

// AllRoles are every role, in the order they are listed.
var AllRoles = []Role{RoleViewer, RoleApprover, RoleOperator, RoleSubmitter}

// Session is the reply of GET /v1/session: who the request's token authenticates, and
// its roles, so the console shows only the controls the token may use.
type Session struct {
	Actor string `json:"actor"`
	Roles []Role `json:"roles"`
}
