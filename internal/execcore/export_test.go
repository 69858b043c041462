package execcore

import (
	"context"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ByReference exposes byReference: what a handler does with an output between the body and
// the commit, so a test can repeat it as a crash and a redelivery would.
func (x *Executor) ByReference(ctx context.Context, op string, out contracts.ToolOutput) (contracts.ToolOutput, error) {
	return x.byReference(ctx, op, out, -1)
}

// FinishOutputWithin exposes finishOutput with a limit of the test's choosing, so the
// boundary is checked on a few bytes rather than on 64 MiB.
func FinishOutputWithin(callID string, out contracts.ToolOutput, limit int) (contracts.ToolOutput, int) {
	return finishOutput(callID, out, limit)
}
