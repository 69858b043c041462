package main

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/brainexec/builtin"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// inProcess invokes the echo tool through the Brain tool registry (argument decoding,
// output rendering and normalisation included) as plain function calls: the lower bound
// of any design.
type inProcess struct{ reg *toolreg.Registry }

func newInProcess() (*inProcess, error) {
	reg := toolreg.NewRegistry()
	// The same body as the builtin echo tool (builtin.Register needs a KV bucket for the
	// counter tool, which this row does not have).
	err := toolreg.Register(reg, tool.ToolFunc("echo", "Returns its `text` argument as text.",
		contracts.CapabilityReplaySafe, func(_ context.Context, a builtin.EchoArgs) (string, error) {
			return a.Text, nil
		}))
	if err != nil {
		return nil, err
	}
	return &inProcess{reg: reg}, nil
}

func (p *inProcess) run(ctx context.Context, runID string, step int64, n int) ([]string, error) {
	calls := echoCalls(n)
	out := make([]string, n)
	for i, c := range calls {
		o, err := p.reg.Invoke(ctx, execcore.Invocation{
			RunID: runID, Step: step, Index: i, CallID: c.CallID,
			OperationID: contracts.OperationID(runID, step, c.CallID), ToolID: c.ToolID, Arguments: c.Arguments, Attempt: 1,
		})
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", c.CallID, err)
		}
		out[i] = execcore.FinishOutput(c.CallID, o).Text()
	}
	return out, nil
}

func (p *inProcess) close() {}
