package cli

import (
	"context"
	"io"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// announceTickets tells w, once per ticket, which ticket holds the batch (runID, step)
// while `submit --wait` waits for it — a batch parked on an approval would otherwise wait
// in silence. It watches the tickets bucket for the batch's keys (a watch delivers the
// tickets already open first) until stop is called. Best effort: a watch that cannot be
// opened only loses the notes, never the wait.
func announceTickets(ctx context.Context, c *session, runID string, step int64, w io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		kv, err := c.js.KeyValue(ctx, c.Names().TicketsBucket())
		if err != nil {
			return
		}
		// Ticket keys are {kind}.{run}.{step}.{call} (see [client.Client.WaitTicket]).
		watch, err := kv.Watch(ctx, "*."+runID+"."+strconv.FormatInt(step, 10)+".*")
		if err != nil {
			return
		}
		seen := map[string]bool{}
		state.Follow(ctx, watch, nil, func(e jetstream.KeyValueEntry) {
			if e.Operation() != jetstream.KeyValuePut {
				return // a ticket resolved or cleared
			}
			var t contracts.ResumeTicket
			if contracts.DecodeRecord(e.Value(), &t) != nil || seen[t.CorrelationID] {
				return
			}
			seen[t.CorrelationID] = true
			renderTicketWait(w, t)
		})
	}()
	return func() { cancel(); <-done }
}
