package contracts

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	// CatalogFormatOpenAIResponses is the tools array of an OpenAI Responses call, whose
	// function tools are flat: {"tools":[{"type":"function","name","description","parameters","strict"?}…]}.
	CatalogFormatOpenAIResponses = "openai-responses"
	// CatalogFormatAnthropic is the tools array of an Anthropic Messages call:
	// {"tools":[{"name","description","input_schema"}…]}.
	CatalogFormatAnthropic = "anthropic"
)

// CatalogFormats is every catalog format, the one list the doors' help and errors name.
func CatalogFormats() []string {
	return []string{CatalogFormatAwaken, CatalogFormatOpenAI, CatalogFormatOpenAIResponses, CatalogFormatAnthropic, CatalogFormatMCP}
}

// CatalogFormatsText is [CatalogFormats] as a sentence: "awaken, openai, … or mcp".
func CatalogFormatsText() string {
	f := CatalogFormats()
	return strings.Join(f[:len(f)-1], ", ") + " or " + f[len(f)-1]
}

// ToolCatalog is the reply of the catalog doors in the awaken format.
type ToolCatalog struct {
	Tools []CatalogTool `json:"tools"`
}

// ToolsRequest is the request body of the micro endpoint {prefix}.api.tools.list: an
// optional format and the agent tools to narrow the list to (nil: every tool).
type ToolsRequest struct {
	Format     string   `json:"format,omitempty"`
	AgentTools []string `json:"agent_tools,omitempty"`
	// Strict asks the openai formats for OpenAI's strict function calling where a tool's
	// schema allows it ([StrictSchema]).
	Strict bool `json:"strict,omitempty"`
}

// OpenAIFunction is one function of the openai format.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

// OpenAIResponsesTool is one function tool of the openai-responses format.
type OpenAIResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

// AnthropicTool is one tool of the anthropic format.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ProviderCatalog is the reply of a provider format: the tools array to hand the model
// as it is, then what a platform needs to map the model's calls back. Names maps every
// provider-safe name of the array to the tool id it stands for ([SafeToolName]); a
// submission may name either. NotStrict gives, when strict was asked, the reason each tool
// left non-strict could not be made strict.
type ProviderCatalog[T any] struct {
	Tools     []T               `json:"tools"`
	Names     map[string]string `json:"names"`
	NotStrict map[string]string `json:"not_strict,omitempty"`
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

// RenderCatalog returns the catalog document in format ("" is the awaken format) without
// strict schemas; see [RenderCatalogFor].
func RenderCatalog(tools []CatalogTool, format string) (any, error) {
	return RenderCatalogFor(tools, ToolsRequest{Format: format})
}

// RenderCatalogFor returns the catalog document req asks for. The awaken format lists
// paused tools with their pause; the provider formats (openai, openai-responses,
// anthropic) and mcp omit them: those are the tool lists handed to a model, which has no
// field for "paused", and a tool the model is offered but whose every call is blocked only
// costs it a turn. The provider formats name each tool by its [SafeToolName] and say the
// mapping in names; with req.Strict, the openai formats mark a tool strict and close its
// schema where [StrictSchema] can, and give the reason in not_strict where it cannot.
func RenderCatalogFor(tools []CatalogTool, req ToolsRequest) (any, error) {
	if tools == nil {
		tools = []CatalogTool{}
	}
	switch req.Format {
	case "", CatalogFormatAwaken:
		return ToolCatalog{Tools: tools}, nil
	}
	tools = slices.DeleteFunc(slices.Clone(tools), func(t CatalogTool) bool { return t.Paused })
	names := make(map[string]string, len(tools))
	notStrict := map[string]string{}
	// params returns the parameters of t as the openai formats send them, and whether strict.
	params := func(t CatalogTool, name string) (json.RawMessage, *bool) {
		if !req.Strict {
			return t.Parameters, nil
		}
		strict, err := StrictSchema(t.Parameters)
		if err != nil {
			notStrict[name] = err.Error()
			no := false
			return t.Parameters, &no
		}
		yes := true
		return strict, &yes
	}
	for _, t := range tools {
		names[SafeToolName(t.ID)] = t.ID
	}
	if len(names) != len(tools) {
		// Only a hash collision of two changed names could do this; refuse rather than
		// offer a name that runs the wrong tool.
		return nil, fmt.Errorf("two tools of the catalog have the same provider-safe name")
	}
	switch req.Format {
	case CatalogFormatOpenAI:
		out := make([]OpenAITool, len(tools))
		for i, t := range tools {
			name := SafeToolName(t.ID)
			p, strict := params(t, name)
			out[i] = OpenAITool{Type: "function", Function: OpenAIFunction{Name: name, Description: t.Description, Parameters: p, Strict: strict}}
		}
		return ProviderCatalog[OpenAITool]{Tools: out, Names: names, NotStrict: emptyNil(notStrict)}, nil
	case CatalogFormatOpenAIResponses:
		out := make([]OpenAIResponsesTool, len(tools))
		for i, t := range tools {
			name := SafeToolName(t.ID)
			p, strict := params(t, name)
			out[i] = OpenAIResponsesTool{Type: "function", Name: name, Description: t.Description, Parameters: p, Strict: strict}
		}
		return ProviderCatalog[OpenAIResponsesTool]{Tools: out, Names: names, NotStrict: emptyNil(notStrict)}, nil
	case CatalogFormatAnthropic:
		out := make([]AnthropicTool, len(tools))
		for i, t := range tools {
			out[i] = AnthropicTool{Name: SafeToolName(t.ID), Description: t.Description, InputSchema: t.Parameters}
		}
		return ProviderCatalog[AnthropicTool]{Tools: out, Names: names}, nil
	case CatalogFormatMCP:
		out := make([]MCPTool, len(tools))
		for i, t := range tools {
			out[i] = MCPTool{Name: t.ID, Description: t.Description, InputSchema: t.Parameters, Annotations: t.Annotations}
		}
		return struct {
			Tools []MCPTool `json:"tools"`
		}{out}, nil
	}
	return nil, fmt.Errorf("unknown catalog format %q (want %s)", req.Format, CatalogFormatsText())
}

func emptyNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
