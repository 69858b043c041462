package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Micro error headers (the nats micro protocol's).
const (
	microErrorHeader     = "Nats-Service-Error"
	microErrorCodeHeader = "Nats-Service-Error-Code"
)

// Tools returns the tool catalog of the deployment, asked of the api's micro endpoint
// {prefix}.api.tools.list: every tool of the trusted configuration, in its order, with the
// JSON Schema of its arguments, its kind, target and capability. agentTools, when given,
// narrows it the way a batch's agent.tools does. The api must be running.
func (c *Client) Tools(ctx context.Context, agentTools ...string) ([]contracts.CatalogTool, error) {
	raw, err := c.ToolsDocument(ctx, contracts.CatalogFormatAwaken, agentTools)
	if err != nil {
		return nil, err
	}
	var cat contracts.ToolCatalog
	if err := json.Unmarshal(raw, &cat); err != nil {
		return nil, fmt.Errorf("client: tool catalog: %w", err)
	}
	return cat.Tools, nil
}

// ToolsDocument returns the tool catalog as JSON in format (contracts.CatalogFormatAwaken,
// CatalogFormatOpenAI — Chat Completions tools —, CatalogFormatOpenAIResponses — Responses
// function tools —, CatalogFormatAnthropic or CatalogFormatMCP); nil agentTools means
// every tool. The provider formats name tools by their provider-safe names and carry the
// mapping ({"tools":[…],"names":{safe: id}}).
func (c *Client) ToolsDocument(ctx context.Context, format string, agentTools []string) (json.RawMessage, error) {
	return c.ToolsFor(ctx, contracts.ToolsRequest{Format: format, AgentTools: agentTools})
}

// ToolsFor returns the tool catalog req asks for as JSON (req.Strict: OpenAI strict
// schemas where the tool's schema allows them, see contracts.StrictSchema).
func (c *Client) ToolsFor(ctx context.Context, req contracts.ToolsRequest) (json.RawMessage, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("client: tools request: %w", err)
	}
	m, err := c.nc.RequestWithContext(ctx, c.names.ToolsListSubject(), body)
	if err != nil {
		return nil, fmt.Errorf("client: tool catalog: %w", err)
	}
	if msg := m.Header.Get(microErrorHeader); msg != "" {
		return nil, fmt.Errorf("client: tool catalog: %s (%s)", msg, m.Header.Get(microErrorCodeHeader))
	}
	return json.RawMessage(m.Data), nil
}

// PauseTool pauses toolID (the kill switch), asked of the api's micro endpoint
// {prefix}.api.tools.pause: from the reply on, the gate blocks every new call of the tool
// with a model-visible error naming the pause and reason; calls already running finish.
// actor names who pauses, for the audit record.
func (c *Client) PauseTool(ctx context.Context, toolID, reason, actor string) (contracts.ToolPauseState, error) {
	return c.toolPause(ctx, c.names.ToolsPauseSubject(), contracts.ToolPauseRequest{ToolID: toolID, Reason: reason, Actor: actor})
}

// ResumeTool lifts the pause of toolID ({prefix}.api.tools.resume).
func (c *Client) ResumeTool(ctx context.Context, toolID, actor string) (contracts.ToolPauseState, error) {
	return c.toolPause(ctx, c.names.ToolsResumeSubject(), contracts.ToolPauseRequest{ToolID: toolID, Actor: actor})
}

func (c *Client) toolPause(ctx context.Context, subject string, req contracts.ToolPauseRequest) (contracts.ToolPauseState, error) {
	var st contracts.ToolPauseState
	body, err := json.Marshal(req)
	if err != nil {
		return st, fmt.Errorf("client: tool pause: %w", err)
	}
	m, err := c.nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return st, fmt.Errorf("client: tool pause: %w", err)
	}
	if msg := m.Header.Get(microErrorHeader); msg != "" {
		return st, fmt.Errorf("client: tool pause: %s (%s)", msg, m.Header.Get(microErrorCodeHeader))
	}
	if err := json.Unmarshal(m.Data, &st); err != nil {
		return st, fmt.Errorf("client: tool pause: %w", err)
	}
	return st, nil
}
