package contracts

import "time"

// TypeMCPCallAudit records a tools/call an MCP client made through awaken's MCP door,
// published before the call's batch is submitted: who asked (the authenticated actor),
// from which MCP session and client, and which batch carries the call.
const TypeMCPCallAudit = "io.awaken.audit.mcp_call.v1"

// Metadata keys the MCP door sets on the batches it submits ([BatchSubmission.Metadata]).
const (
	MetadataMCPSessionID     = "mcp.session_id"
	MetadataMCPClientName    = "mcp.client_name"
	MetadataMCPClientVersion = "mcp.client_version"
	MetadataMCPTransport     = "mcp.transport"
	MetadataActor            = "actor"
)

// MCPCallAudit is the payload of io.awaken.audit.mcp_call.v1.
type MCPCallAudit struct {
	RunID   string `json:"run_id"`
	BatchID string `json:"batch_id"`
	CallID  string `json:"call_id"`
	ToolID  string `json:"tool_id"`
	// SessionID is the MCP session id (the Mcp-Session-Id of Streamable HTTP, or the id
	// `awaken mcp-serve` gives its stdio session).
	SessionID string `json:"session_id"`
	// ClientName and ClientVersion are what the client said in initialize's clientInfo
	// (self-declared, not authenticated).
	ClientName    string `json:"client_name,omitempty"`
	ClientVersion string `json:"client_version,omitempty"`
	// Transport is "streamable-http" or "stdio".
	Transport string `json:"transport"`
	// Actor is who the door authenticated: the api token's name over HTTP, the
	// --actor of `awaken mcp-serve` (claimed) over stdio.
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
}
