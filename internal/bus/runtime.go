package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// This file is the small runtime a pipeline service is made of: a list of consumers that
// share one set of delivery options, started together and stopped together, and the
// strict decoder of the internal work payloads their handlers read.

// DeliveryOptions is how every consumer of one service settles its messages; [Start] applies it
// to each [Route]'s spec, so a service states it once.
type DeliveryOptions struct {
	AckWait    time.Duration
	MaxDeliver int
	BackOff    []time.Duration
	Workers    int
	// Names gives the dead-letter subjects.
	Names contracts.Names
	// Observer sees every delivery (metrics, tracing); nil turns observation off.
	Observer Observer
	// HandlerTimeout is the deadline of each handler run (see [ConsumerSpec]).
	HandlerTimeout time.Duration
}

// Route is one consumer of a service: what it consumes (stream, durable, filter, accepted
// types, hooks — the delivery fields of Spec are overwritten by [Start]) and its handler.
type Route struct {
	Spec    ConsumerSpec
	Handler Handler
}

// Consumers is a service's running consume loops, stopped together.
type Consumers struct {
	subs []*Subscription
}

// Start applies opts to every route and starts their consume loops in order. If one fails
// to start, the loops already running are stopped (gracefully, without ctx's
// cancellation) and the error names the durable. ctx is the hard-stop context of the
// handlers; use [Consumers.Stop] for a graceful stop.
func Start(ctx context.Context, js jetstream.JetStream, opts DeliveryOptions, routes []Route, log zerolog.Logger) (*Consumers, error) {
	c := &Consumers{}
	for _, r := range routes {
		spec := r.Spec
		spec.AckWait, spec.MaxDeliver, spec.BackOff = opts.AckWait, opts.MaxDeliver, opts.BackOff
		spec.Workers, spec.Names, spec.Observer = opts.Workers, opts.Names, opts.Observer
		spec.HandlerTimeout = opts.HandlerTimeout
		sub, err := Consume(ctx, js, spec, r.Handler, log)
		if err != nil {
			stopErr := c.Stop(context.WithoutCancel(ctx))
			return nil, errors.Join(fmt.Errorf("consumer %s: %w", spec.Durable, err), stopErr)
		}
		c.subs = append(c.subs, sub)
	}
	return c, nil
}

// Stop drains every consumer at once — stop pulling, let the handlers in flight finish
// and settle — bounded by ctx. It is safe to call more than once, and on a nil
// *Consumers.
func (c *Consumers) Stop(ctx context.Context) error {
	if c == nil {
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.subs))
	for i, sub := range c.subs {
		wg.Go(func() { errs[i] = sub.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ErrTrailingData is wrapped by [Decode] when a payload holds more than one JSON value.
var ErrTrailingData = errors.New("trailing data after the payload")

// Decode decodes an internal work payload into a T, refusing unknown fields and trailing
// data: a payload this version cannot read exactly is a deployment error to surface, not
// something to guess at.
func Decode[T any](data []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		var zero T
		return zero, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var zero T
		return zero, ErrTrailingData
	}
	return v, nil
}

// ServiceDelivery is the delivery every pipeline service starts from: a handler does a few
// KV round trips and publishes, so 30 s of ack wait is generous (running handlers are
// heartbeated, so it only bounds how long a crashed process holds a message); 10
// deliveries before a transiently failing message is exhausted; 4 messages at once per
// consumer; and the one back-off list ([DefaultBackOff]). A service adjusts it with its own
// [DeliveryOption]s (the publisher retries for ever), and the configuration's
// consumers.ack_wait with [WithAckWait].
func ServiceDelivery() DeliveryOptions {
	return DeliveryOptions{AckWait: DefaultAckWait, MaxDeliver: 10, Workers: 4, BackOff: DefaultBackOff()}
}

// DeliveryOption adjusts a service's [DeliveryOptions]; services take these as the
// options of their Start, on top of their own defaults.
type DeliveryOption func(*DeliveryOptions)

// With returns o with opts applied in order.
func (o DeliveryOptions) With(opts ...DeliveryOption) DeliveryOptions {
	o.BackOff = append([]time.Duration(nil), o.BackOff...)
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithWorkers sets how many messages each consumer handles at once in this process;
// n ≤ 0 keeps the default. Pipeline handlers are idempotent and serialise on their
// records' compare-and-swap, so any value is safe.
func WithWorkers(n int) DeliveryOption {
	return func(o *DeliveryOptions) {
		if n > 0 {
			o.Workers = n
		}
	}
}

// WithDelivery overrides the redelivery policy: maxDeliver deliveries before a
// transiently failing message is exhausted (0 keeps the default, a negative value means
// unlimited), and the nak delay after each failed delivery (the last entry repeats; none
// keeps the default). Tests use it to exhaust a message quickly.
func WithDelivery(maxDeliver int, backOff ...time.Duration) DeliveryOption {
	return func(o *DeliveryOptions) {
		if maxDeliver != 0 {
			o.MaxDeliver = maxDeliver
		}
		if len(backOff) > 0 {
			o.BackOff = append([]time.Duration(nil), backOff...)
		}
	}
}

// WithAckWait sets how long the server waits for a settlement before redelivering; d ≤ 0
// keeps the default. Running handlers are heartbeated, so it only bounds how long a
// crashed process holds a message.
func WithAckWait(d time.Duration) DeliveryOption {
	return func(o *DeliveryOptions) {
		if d > 0 {
			o.AckWait = d
		}
	}
}
