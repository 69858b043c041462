package execcore

import (
	"context"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ByReference exposes byReference: what a handler does with an output between the body and
// the commit, so a test can repeat it as a crash and a redelivery would.
func (x *Executor) ByReference(ctx context.Context, op string, out contracts.ToolOutput) (contracts.ToolOutput, error) {
	return x.byReference(ctx, op, out)
}
