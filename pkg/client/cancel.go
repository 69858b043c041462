package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrCancelPending is wrapped by [Client.CancelRun] when the cancellation was stored but
// the run was not seen ended before ctx ended: the gate will still apply it (sending it
// again is harmless), but a batch submitted now may still be accepted.
var ErrCancelPending = errors.New("run cancel stored, run not seen ended yet")

// cancelHedgeEvery is how often CancelRun, while its subscription has said nothing, reads
// the events stream for the run's announcement: a plain subscription loses what arrives
// during a reconnect, and a run ended before (its announcement long stored) is announced
// again under the same id, which the stream drops but subscribers still get — unless
// they miss it.
const cancelHedgeEvery = 2 * time.Second

// CancelRun cancels runID and returns once the run has durably ended: the gate recorded
// the end on the run record (so every later submission of the run is refused with
// run_cancelled, or run_ended for a run that had ended otherwise before) and sealed its
// open batch, and announced it with io.awaken.run.ended.v1 on the run's events subject —
// the event returned. Its Reason is "cancelled", or the earlier end's reason. ctx bounds
// the wait; when it ends first the error wraps [ErrCancelPending].
//
// It subscribes to the run's events subject before publishing the command, so the
// announcement of this very cancellation cannot arrive unseen before the subscription;
// every [cancelHedgeEvery] without it, it also reads the announcement from the events
// stream, in case the subscription lost it.
func (c *Client) CancelRun(ctx context.Context, runID, reason string, opts ...CancelOption) (contracts.RunEndedEvent, error) {
	o := cancelOptions{check: func(ctx context.Context) (contracts.RunEndedEvent, bool, error) {
		return c.runEndedFromStream(ctx, runID)
	}}
	for _, opt := range opts {
		opt(&o)
	}
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
	pending := func() error {
		return fmt.Errorf("client: run %s: %w: %w", runID, ErrCancelPending, context.Cause(ctx))
	}
	for {
		wait, cancel := context.WithTimeout(ctx, cancelHedgeEvery)
		msg, err := sub.NextMsgWithContext(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return contracts.RunEndedEvent{}, pending()
		case errors.Is(err, context.DeadlineExceeded):
			ended, found, err := o.check(ctx)
			if ctx.Err() != nil {
				return contracts.RunEndedEvent{}, pending()
			}
			if err == nil && found {
				return ended, nil
			}
			continue // not stored yet (or the read failed): keep waiting
		case err != nil:
			return contracts.RunEndedEvent{}, fmt.Errorf("client: waiting for run %s to end: %w", runID, err)
		}
		if ended, ok := runEnded(msg.Header, msg.Data, runID); ok {
			return ended, nil
		}
	}
}

// CancelOption configures [Client.CancelRun].
type CancelOption func(*cancelOptions)

type cancelOptions struct {
	check func(ctx context.Context) (contracts.RunEndedEvent, bool, error)
}

// CheckEndedWith makes CancelRun hedge its subscription with check instead of a read of
// the events stream: a caller that may read the run records (the api) asks them whether
// the run has ended. check answers the run's end and whether it has one.
func CheckEndedWith(check func(ctx context.Context) (contracts.RunEndedEvent, bool, error)) CancelOption {
	return func(o *cancelOptions) { o.check = check }
}

// runEnded decodes a message of the run's events subject as its io.awaken.run.ended.v1
// announcement; ok is false for any other event (facts, progress).
func runEnded(h map[string][]string, data []byte, runID string) (contracts.RunEndedEvent, bool) {
	ev, err := cloudevent.DecodeMsg(h, data)
	if err != nil || ev.Type != contracts.TypeRunEnded {
		return contracts.RunEndedEvent{}, false
	}
	var ended contracts.RunEndedEvent
	if err := json.Unmarshal(ev.Data, &ended); err != nil || ended.RunID != runID {
		return contracts.RunEndedEvent{}, false
	}
	return ended, true
}

// runEndedFromStream reads the events stream for the run's stored io.awaken.run.ended.v1:
// an ordered consumer over the run's events subject, headers only (the type is a header),
// and the one announcement's body once found.
func (c *Client) runEndedFromStream(ctx context.Context, runID string) (contracts.RunEndedEvent, bool, error) {
	cons, err := c.js.OrderedConsumer(ctx, c.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{c.names.EventsSubject(runID)},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		HeadersOnly:       true,
		InactiveThreshold: orderedConsumerIdle,
	})
	if err != nil {
		return contracts.RunEndedEvent{}, false, fmt.Errorf("events consumer: %w", err)
	}
	defer c.deleteOrderedOn(c.names.EventsStream(), cons)
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return contracts.RunEndedEvent{}, false, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if !hasType(m.Headers(), contracts.TypeRunEnded) {
				continue
			}
			md, err := m.Metadata()
			if err != nil {
				return contracts.RunEndedEvent{}, false, err
			}
			stream, err := c.js.Stream(ctx, c.names.EventsStream())
			if err != nil {
				return contracts.RunEndedEvent{}, false, err
			}
			raw, err := stream.GetMsg(ctx, md.Sequence.Stream)
			if err != nil {
				return contracts.RunEndedEvent{}, false, err
			}
			if ended, ok := runEnded(raw.Header, raw.Data, runID); ok {
				return ended, true, nil
			}
		}
		if err := batch.Error(); err != nil {
			return contracts.RunEndedEvent{}, false, err
		}
		if n == 0 {
			return contracts.RunEndedEvent{}, false, nil
		}
	}
}

// hasType reports whether headers name CloudEvent type typ (ce-type, matched without
// regard to case as the CloudEvents NATS binding asks).
func hasType(h map[string][]string, typ string) bool {
	for k, v := range h {
		if strings.EqualFold(k, "ce-type") && len(v) > 0 && v[0] == typ {
			return true
		}
	}
	return false
}
