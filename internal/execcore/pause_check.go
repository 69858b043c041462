package execcore

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// runUnlessPaused runs the body of inv unless its tool is paused right now (the kill
// switch, read from the in-memory watch of the pauses bucket, [pipeline.Env.WatchedPause]):
// a call the gate decided before the pause and that was still queued, or is redelivered
// after a crash, then ends blocked with the pause's reason — the output a new call of
// the paused tool gets from the gate — and its body is never entered.
func (x *Executor) runUnlessPaused(ctx context.Context, inv Invocation) (contracts.ToolOutput, error) {
	if p := x.env.WatchedPause(ctx, inv.ToolID); p != nil {
		zerolog.Ctx(ctx).Info().Str("pause_reason", p.Reason).
			Msg("tool paused since the call was decided; blocked before its body was entered")
		out, _ := p.GateOutcome().ImmediateOutput(inv.CallID)
		return out.Normalize(), nil
	}
	return x.run(ctx, inv)
}
