package pipeline

// ToolIDs yields the id of every tool whose descriptor brain-exec published (the MCP
// tools of the configured servers among them): what the batcher resolves a submission's
// provider-safe tool names against ([config.Config.ResolveToolName]).
func (p *PublishedAnnotations) ToolIDs(yield func(string) bool) {
	p.mu.RLock()
	ids := make([]string, 0, len(p.byTool))
	for id := range p.byTool {
		ids = append(ids, id)
	}
	p.mu.RUnlock()
	for _, id := range ids {
		if !yield(id) {
			return
		}
	}
}
