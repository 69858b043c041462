package execcore

import (
	"context"

	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// toolSpan starts the execute_tool span of inv (OpenTelemetry GenAI semantic conventions;
// see [telemetry.Telemetry.StartToolSpan]) under ctx, the delivery's consumer span. The
// body runs under the returned ctx, so an MCP request carries this span's trace context.
// end takes what the attempt produced: an output, an abort (the handler stops without
// committing: the body's outcome is recovered by policy) or a cancellation of the run.
func (x *Executor) toolSpan(ctx context.Context, req contracts.ExecRequest, inv Invocation) (context.Context, func(out contracts.ToolOutput, err error, cancelled bool)) {
	toolType := telemetry.ToolTypeFunction
	if x.opts.ToolType != nil {
		toolType = x.opts.ToolType(req.ToolID)
	}
	content := x.env.Config != nil && x.env.Config.Executors.TraceToolContent
	ctx, end := x.env.Telemetry.StartToolSpan(ctx, telemetry.ToolCall{
		ToolID: req.ToolID, CallID: req.CallID, ToolType: toolType,
		RunID: req.RunID, OperationID: inv.OperationID, Step: req.Step, Index: req.Index, Attempt: inv.Attempt,
		Arguments: req.Arguments, Content: content,
	})
	return ctx, func(out contracts.ToolOutput, err error, cancelled bool) {
		switch {
		case cancelled:
			out = contracts.ExecutionFailed("cancelled: the run was cancelled while the tool ran").Output(req.CallID)
		case err != nil:
			out = contracts.ExecutionFailed("aborted before an outcome was committed: " + err.Error()).Output(req.CallID)
		}
		end(out)
	}
}
