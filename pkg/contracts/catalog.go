package contracts

import (
	"encoding/json"
	"fmt"
	"slices"
)

// CatalogTool is one tool of the tool catalog: what the model may call, with the JSON
// Schema of its arguments taken from the one place it is defined (a typed tool's Go
// argument type, an MCP server's inputSchema, or the configuration's parameters), and
// where and how it runs.
type CatalogTool struct {
	ID          string                 `json:"id"`
	Description string                 `json:"description"`
	Parameters  json.RawMessage        `json:"parameters"`
	Kind        ToolKind               `json:"kind"`
	Target      ToolExecutionTarget    `json:"target"`
	Capability  ToolRecoveryCapability `json:"capability"`
	// Annotations are an MCP tool's behaviour hints as its server listed them (they steer
	// the host only for a server with trust_annotations).
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	// Paused is set while an operator has paused the tool: its new calls are blocked.
	Paused bool `json:"paused,omitempty"`
	// Pause is the pause record (reason, actor, time) while Paused.
	Pause *ToolPause `json:"pause,omitempty"`
}

// MarkPaused sets Paused and Pause from pauses (the paused tools by id).
func (t *CatalogTool) MarkPaused(pauses map[string]ToolPause) {
	if p, ok := pauses[t.ID]; ok {
		t.Paused, t.Pause = true, &p
	}
}

// Catalog formats, as the api's format parameter names them.
const (
	// CatalogFormatAwaken is the full form: {"tools":[CatalogTool…]}.
	CatalogFormatAwaken = "awaken"
	// CatalogFormatOpenAI is the tools array of a chat-completions or responses call:
	// {"tools":[{"type":"function","function":{"name","description","parameters"}}…]}.
	CatalogFormatOpenAI = "openai"
	// CatalogFormatMCP lists MCP Tool objects: {"tools":[{"name","description","inputSchema"}…]}.
	CatalogFormatMCP = "mcp"
)

// ToolCatalog is the reply of the catalog doors in the awaken format.
type ToolCatalog struct {
	Tools []CatalogTool `json:"tools"`
}

// ToolsRequest is the request body of the micro endpoint {prefix}.api.tools.list: an
// optional format and the agent tools to narrow the list to (nil: every tool).
type ToolsRequest struct {
	Format     string   `json:"format,omitempty"`
	AgentTools []string `json:"agent_tools,omitempty"`
}

// OpenAIFunction is one function of the openai format.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// OpenAITool is one tool of the openai format.
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// MCPTool is one tool of the mcp format.
type MCPTool struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	InputSchema json.RawMessage  `json:"inputSchema"`
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
}

// NarrowCatalog keeps the tools whose id agentTools names, the way a batch's agent.tools
// decides which configured tools its calls may use; nil agentTools keeps every tool.
func NarrowCatalog(tools []CatalogTool, agentTools []string) []CatalogTool {
	if agentTools == nil {
		return tools
	}
	return slices.DeleteFunc(slices.Clone(tools), func(t CatalogTool) bool { return !slices.Contains(agentTools, t.ID) })
}

// RenderCatalog returns the catalog document in format ("" is the awaken format). The
// awaken format lists paused tools with their pause; the openai and mcp formats omit them:
// those are the tool lists handed to a model, which has no field for "paused", and a tool
// the model is offered but whose every call is blocked only costs it a turn.
func RenderCatalog(tools []CatalogTool, format string) (any, error) {
	if tools == nil {
		tools = []CatalogTool{}
	}
	switch format {
	case "", CatalogFormatAwaken:
		return ToolCatalog{Tools: tools}, nil
	}
	tools = slices.DeleteFunc(slices.Clone(tools), func(t CatalogTool) bool { return t.Paused })
	switch format {
	case CatalogFormatOpenAI:
		out := make([]OpenAITool, len(tools))
		for i, t := range tools {
			out[i] = OpenAITool{Type: "function", Function: OpenAIFunction{Name: t.ID, Description: t.Description, Parameters: t.Parameters}}
		}
		return struct {
			Tools []OpenAITool `json:"tools"`
		}{out}, nil
	case CatalogFormatMCP:
		out := make([]MCPTool, len(tools))
		for i, t := range tools {
			out[i] = MCPTool{Name: t.ID, Description: t.Description, InputSchema: t.Parameters, Annotations: t.Annotations}
		}
		return struct {
			Tools []MCPTool `json:"tools"`
		}{out}, nil
	}
	return nil, fmt.Errorf("unknown catalog format %q (want awaken, openai or mcp)", format)
}
