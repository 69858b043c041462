package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrCancelPending is wrapped by [Client.CancelRun] when the cancellation was stored but
// the run was not seen ended before ctx ended: the gate will still apply it (sending it
// again is harmless), but a batch submitted now may still be accepted.
var ErrCancelPending = errors.New("run cancel stored, run not seen ended yet")

// CancelRun cancels runID and returns once the run has durably ended: the gate recorded
// the end on the run record (so every later submission of the run is refused with
// run_cancelled, or run_ended for a run that had ended otherwise before) and sealed its
// open batch, and announced it with io.awaken.run.ended.v1 on the run's events subject —
// the event returned. Its Reason is "cancelled", or the earlier end's reason. ctx bounds
// the wait; when it ends first the error wraps [ErrCancelPending].
//
// It subscribes to the run's events subject before publishing the command, so the
// announcement of this very cancellation cannot be missed by arriving early. That
// subscription is at-most-once: a message lost to a reconnect makes the wait run out.
func (c *Client) CancelRun(ctx context.Context, runID, reason string) (contracts.RunEndedEvent, error) {
	if err := contracts.ValidateID("run_id", runID); err != nil {
		return contracts.RunEndedEvent{}, fmt.Errorf("client: %w", err)
	}
	sub, err := c.nc.SubscribeSync(c.names.EventsSubject(runID))
	if err != nil {
		return contracts.RunEndedEvent{}, fmt.Errorf("client: subscribe to the events of run %s: %w", runID, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.Cancel(ctx, runID, reason); err != nil {
		return contracts.RunEndedEvent{}, err
	}
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return contracts.RunEndedEvent{}, fmt.Errorf("client: run %s: %w: %w", runID, ErrCancelPending, context.Cause(ctx))
			}
			return contracts.RunEndedEvent{}, fmt.Errorf("client: waiting for run %s to end: %w", runID, err)
		}
		ev, err := bus.DecodeMsg(msg.Header, msg.Data)
		if err != nil || ev.Type != contracts.TypeRunEnded {
			continue // the run's other events (facts, progress)
		}
		var ended contracts.RunEndedEvent
		if err := json.Unmarshal(ev.Data, &ended); err != nil || ended.RunID != runID {
			continue
		}
		return ended, nil
	}
}
