package bus

import (
	"context"
	"errors"
	"fmt"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// MaxAtomicBatch is the largest atomic batch nats-server accepts by default
// (jetstream max_batch_size). PublishAtomic refuses larger batches before sending anything.
const MaxAtomicBatch = 1000

// Outgoing is one event to publish on one subject.
type Outgoing struct {
	Subject string
	Event   cloudevent.Event
}

// Publisher publishes CloudEvents in binary mode with Nats-Msg-Id set to the event id, so
// that every re-publish after a crash is deduplicated by the stream. It holds no state of
// its own beyond the JetStream context and is safe for concurrent use.
type Publisher struct {
	js         jetstream.JetStream
	inject     Injector
	ackTimeout time.Duration // 0: PublishAckTimeout
	chain      Chain         // nil: no subject is chained
}

// Chain appends the messages of the subjects it covers as links of a tamper-evident chain
// instead of plain publishes: internal/auditlog's Appender, for the audit subjects. Append
// stores msg (setting its chain headers) and answers like a JetStream publish; a duplicate
// is an acknowledgement with Duplicate set.
type Chain interface {
	Covers(subject string) bool
	Append(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error)
}

// WithChain returns a copy of p that hands every message on a subject c covers to c (nil
// removes it), so no audit record published through it can bypass the chain; p itself is
// unchanged.
func (p *Publisher) WithChain(c Chain) *Publisher {
	cp := *p
	cp.chain = c
	return &cp
}

// chained reports whether subject goes through the chain.
func (p *Publisher) chained(subject string) bool { return p.chain != nil && p.chain.Covers(subject) }

// Injector adds attributes derived from ctx to an outgoing event just before it is
// encoded, typically the distributed-tracing extension (traceparent, tracestate) of the
// span the publishing handler runs in. It receives a copy of the event whose Extensions
// map it may modify freely. It must be safe for concurrent use and must not block.
type Injector func(ctx context.Context, e *cloudevent.Event)

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// WithInjector returns a copy of p that runs inject on every event it publishes (nil
// removes it). The copy shares the JetStream context; p itself is unchanged, so a
// Publisher already handed to other goroutines is never mutated.
func (p *Publisher) WithInjector(inject Injector) *Publisher {
	c := *p
	c.inject = inject
	return &c
}

// WithAckTimeout returns a copy of p whose publishes wait at most d for their
// acknowledgements instead of [PublishAckTimeout] (d <= 0 restores the default); p itself
// is unchanged.
func (p *Publisher) WithAckTimeout(d time.Duration) *Publisher {
	c := *p
	c.ackTimeout = max(d, 0)
	return &c
}

// withAckTimeout bounds ctx by the publisher's acknowledgement timeout.
func (p *Publisher) withAckTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	d := p.ackTimeout
	if d == 0 {
		d = PublishAckTimeout
	}
	return context.WithTimeout(ctx, d)
}

// encode renders e on subject after applying the injector to a copy of it, so the
// caller's event (and its Extensions map) is never modified.
func (p *Publisher) encode(ctx context.Context, subject string, e cloudevent.Event) *nats.Msg {
	if p.inject != nil {
		ext := make(map[string]string, len(e.Extensions)+2)
		for k, v := range e.Extensions {
			ext[k] = v
		}
		e.Extensions = ext
		p.inject(ctx, &e)
	}
	return cloudevent.EncodeMsg(subject, e)
}

// writable refuses, before anything is sent, a message of a type the previous version
// does not read while new formats are off ([contracts.CheckMessageFormat]): during a
// rolling upgrade a service of the previous version may be the one to read it.
func writable(out ...Outgoing) error {
	for _, o := range out {
		if err := contracts.CheckMessageFormat(o.Event.Type); err != nil {
			return fmt.Errorf("bus: publish %s on %s: %w", o.Event.ID, o.Subject, err)
		}
	}
	return nil
}

// Headers returns the binary-mode headers of e as [Publisher.Publish] would send them —
// ce-* attributes, the injector's trace context — for a message that is not published
// through p: a record revision written by state.Store.WithAnnounce.
func (p *Publisher) Headers(ctx context.Context, e cloudevent.Event) nats.Header {
	return p.encode(ctx, "", e).Header
}

// JetStream returns the JetStream context the publisher uses.
func (p *Publisher) JetStream() jetstream.JetStream { return p.js }

// Publish stores e on subject and waits for the stream's acknowledgement. A duplicate
// (the same event id inside the duplicate window) is a success: the returned PubAck has
// Duplicate set and the sequence of the original message.
func (p *Publisher) Publish(ctx context.Context, subject string, e cloudevent.Event) (*jetstream.PubAck, error) {
	if err := writable(Outgoing{Subject: subject, Event: e}); err != nil {
		return nil, err
	}
	ctx, cancel := p.withAckTimeout(ctx)
	defer cancel()
	var ack *jetstream.PubAck
	var err error
	if p.chained(subject) {
		ack, err = p.chain.Append(ctx, p.encode(ctx, subject, e))
	} else {
		ack, err = p.js.PublishMsg(ctx, p.encode(ctx, subject, e))
	}
	if err != nil {
		return nil, fmt.Errorf("bus: publish %s %s on %s: %w", e.Type, e.ID, subject, err)
	}
	return ack, nil
}

// PublishAckTimeout bounds the wait for the acknowledgements of [Publisher.Publish],
// [Publisher.PublishAll] and [Publisher.PublishScheduled]. (An atomic batch of up to
// 1,000 messages may legitimately take longer; the caller's deadline bounds it.)
// Without it, an acknowledgement lost in a JetStream leader change leaves the wait
// unresolved forever: the handler hangs, its heartbeat keeps the input in progress, and
// the batch never finishes (seen in the 3-node cluster test when the stream leader
// stopped). With it the publish fails, the input is redelivered, and the idempotent
// re-publish (deterministic message ids) completes the step. It is well below the
// consumers' 30 s ack wait.
const PublishAckTimeout = 10 * time.Second

// PublishAll publishes independent messages concurrently and waits until every one is
// acknowledged (duplicates count as acknowledged). It returns the first error in input
// order once all acknowledgements or errors are in, or when ctx ends or
// [PublishAckTimeout] passes. The messages are not atomic: after an error some may be
// stored; because each carries its deterministic id, calling PublishAll again with the
// same messages is the recovery.
//
// Messages on chained subjects ([Publisher.WithChain]) are appended alongside the others:
// one goroutine per chained subject appends that subject's messages in input order (a
// chain's order is its subjects' order), concurrently with the asynchronous publishes.
func (p *Publisher) PublishAll(ctx context.Context, out []Outgoing) error {
	if len(out) == 0 {
		return nil
	}
	if err := writable(out...); err != nil {
		return err
	}
	ctx, cancel := p.withAckTimeout(ctx)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, len(out))
	chainErrs := p.appendChained(ctx, out)
	var firstErr error
	for i, o := range out {
		if p.chained(o.Subject) {
			continue
		}
		f, err := p.js.PublishMsgAsync(p.encode(ctx, o.Subject, o.Event))
		if err != nil {
			firstErr = orErr(firstErr, fmt.Errorf("bus: publish %s %s on %s: %w", o.Event.Type, o.Event.ID, o.Subject, err))
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			o := out[i]
			firstErr = orErr(firstErr, fmt.Errorf("bus: publish %s %s on %s: %w", o.Event.Type, o.Event.ID, o.Subject, err))
		case <-ctx.Done():
			return orErr(firstErr, fmt.Errorf("bus: waiting for %d publish acknowledgements: %w", len(out)-i, ctx.Err()))
		}
	}
	if chainErrs != nil {
		for i, err := range chainErrs() {
			if err != nil {
				o := out[i]
				firstErr = orErr(firstErr, fmt.Errorf("bus: append %s %s on %s: %w", o.Event.Type, o.Event.ID, o.Subject, err))
			}
		}
	}
	return firstErr
}

// PublishLive sends out as plain core NATS messages, in order, with the attributes
// [Publisher.Publish] would give them: for subjects no stream stores (a live projection
// of what is already stored). Nothing is acknowledged; a subscriber that is not there, or
// a connection that drops the message, loses it. It returns the first message that could
// not be sent (too large, or a closed connection), after trying the rest.
func (p *Publisher) PublishLive(ctx context.Context, out []Outgoing) error {
	var firstErr error
	for _, o := range out {
		if err := p.js.Conn().PublishMsg(p.encode(ctx, o.Subject, o.Event)); err != nil {
			firstErr = orErr(firstErr, fmt.Errorf("bus: send %s %s on %s: %w", o.Event.Type, o.Event.ID, o.Subject, err))
		}
	}
	return firstErr
}

// appendChained starts appending the messages of out on chained subjects and returns a
// function that waits for them and returns their errors by index of out (nil: no message
// of out is chained). Appends end when ctx does: the wait is bounded like the publishes'.
func (p *Publisher) appendChained(ctx context.Context, out []Outgoing) func() []error {
	bySubject := map[string][]int{}
	var order []string
	for i, o := range out {
		if !p.chained(o.Subject) {
			continue
		}
		if _, ok := bySubject[o.Subject]; !ok {
			order = append(order, o.Subject)
		}
		bySubject[o.Subject] = append(bySubject[o.Subject], i)
	}
	if len(order) == 0 {
		return nil
	}
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for _, subject := range order {
		wg.Add(1)
		go func(idx []int) {
			defer wg.Done()
			for _, i := range idx {
				if _, err := p.chain.Append(ctx, p.encode(ctx, out[i].Subject, out[i].Event)); err != nil {
					errs[i] = err
					return // a later record must not chain ahead of one that failed
				}
			}
		}(bySubject[subject])
	}
	return func() []error {
		wg.Wait()
		return errs
	}
}

// PublishAtomic publishes out as one JetStream atomic batch: the stream stores all of the
// messages, contiguously and in order, or none of them. Every subject must belong to the
// same stream, and that stream must allow atomic publish (the results stream does).
//
// Message ids work inside the batch: if any of them is within the stream's duplicate
// window the server refuses the whole batch and PublishAtomic returns an error matching
// [ErrAtomicDuplicate]. Since awaken's ids are deterministic, that means the batch was
// already published.
func (p *Publisher) PublishAtomic(ctx context.Context, out []Outgoing) error {
	switch {
	case len(out) == 0:
		return errors.New("bus: atomic publish of an empty batch")
	case len(out) > MaxAtomicBatch:
		return fmt.Errorf("bus: atomic batch of %d messages exceeds the server limit of %d", len(out), MaxAtomicBatch)
	}
	if err := writable(out...); err != nil {
		return err
	}
	msgs := make([]*nats.Msg, len(out))
	for i, o := range out {
		if p.chained(o.Subject) {
			// An atomic batch cannot carry a compare-and-swap per subject.
			return fmt.Errorf("bus: atomic publish of the chained subject %s is not supported", o.Subject)
		}
		msgs[i] = p.encode(ctx, o.Subject, o.Event)
	}
	if _, err := jetstreamext.PublishMsgBatch(ctx, p.js, msgs); err != nil {
		if isAtomicDuplicate(err) {
			return fmt.Errorf("%w: first id %s: %w", ErrAtomicDuplicate, out[0].Event.ID, err)
		}
		return fmt.Errorf("bus: atomic publish of %d messages (first %s on %s): %w", len(out), out[0].Event.ID, out[0].Subject, err)
	}
	return nil
}

func isAtomicDuplicate(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeAtomicDuplicate {
		return true
	}
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) {
		if a := jsErr.APIError(); a != nil && a.ErrorCode == errCodeAtomicDuplicate {
			return true
		}
	}
	return false
}

// PublishScheduled stores e on scheduleSubject as a JetStream message schedule that the
// server delivers, once, on targetSubject at time at (second resolution; a time in the
// past fires at once). Both subjects must belong to one stream that allows message
// schedules (the tickets stream). A schedule subject holds one schedule: publishing a new
// one on the same subject replaces the previous, which is how a ticket's timer is moved.
//
// The schedule message carries e's id as Nats-Msg-Id, so re-publishing the same schedule is
// deduplicated; the server strips that id from the message it delivers on the target, whose
// ce-* headers and body are e's.
func (p *Publisher) PublishScheduled(ctx context.Context, scheduleSubject, targetSubject string, at time.Time, e cloudevent.Event) error {
	if err := writable(Outgoing{Subject: targetSubject, Event: e}); err != nil {
		return err
	}
	ctx, cancel := p.withAckTimeout(ctx)
	defer cancel()
	_, err := p.js.PublishMsg(ctx, p.encode(ctx, scheduleSubject, e),
		jetstream.WithScheduleAt(at), jetstream.WithScheduleTarget(targetSubject))
	if err != nil {
		return fmt.Errorf("bus: schedule %s %s on %s for %s at %s: %w",
			e.Type, e.ID, scheduleSubject, targetSubject, at.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// orErr keeps the first error of a fan-out and drops the rest, which the first usually explains.
func orErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}
