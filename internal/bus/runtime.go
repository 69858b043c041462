package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
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
//
// A consumer that takes one type, or handles every type it accepts alike, sets Handler
// (and Spec.AcceptTypes). One that takes several types, each with its own handler, sets
// ByType instead: Start makes its keys the consumer's AcceptTypes and hands each delivery
// to the handler of its type, so the type list is declared once and the consumer's type
// filter is the only type check (no handler switches on d.Event.Type again). A route that
// sets both Handler and ByType, or ByType and Spec.AcceptTypes, is refused by Start.
type Route struct {
	Spec    ConsumerSpec
	Handler Handler
	// ByType maps each CloudEvent type the consumer takes to its handler.
	ByType map[string]Handler
	// Delivery adjusts the service's [DeliveryOptions] for this route alone, applied after
	// them: a consumer whose work must happen eventually — giving a concurrency slot back —
	// retries for ever where the service's other consumers exhaust (WithDelivery(-1)).
	Delivery []DeliveryOption
	// shared is the handler limit of the partitions of one route ([PerPartition]): their
	// consumers together run at most the route's Workers handlers at once.
	shared *HandlerLimit
}

// consumer returns the spec and the handler [Start] gives the consume loop for r, or why
// r is malformed.
func (r Route) consumer() (ConsumerSpec, Handler, error) {
	if len(r.ByType) == 0 {
		return r.Spec, r.Handler, nil // a nil Handler is refused by Consume
	}
	if r.Handler != nil {
		return ConsumerSpec{}, nil, fmt.Errorf("bus: route %s sets both Handler and ByType; set one", r.Spec.Durable)
	}
	if len(r.Spec.AcceptTypes) > 0 {
		return ConsumerSpec{}, nil, fmt.Errorf("bus: route %s sets both ByType and AcceptTypes; ByType's types are the accepted ones", r.Spec.Durable)
	}
	routes := make(typeRoutes, len(r.ByType)) // a copy: the caller's map may change after Start
	for typ, h := range r.ByType {
		switch {
		case typ == "":
			return ConsumerSpec{}, nil, fmt.Errorf("bus: route %s: ByType has an empty type", r.Spec.Durable)
		case h == nil:
			return ConsumerSpec{}, nil, fmt.Errorf("bus: route %s: ByType maps %s to a nil handler", r.Spec.Durable, typ)
		}
		routes[typ] = h
	}
	spec := r.Spec
	spec.AcceptTypes = slices.Sorted(maps.Keys(routes))
	return spec, routes.handle, nil
}

// typeRoutes is the handler of a route set up with [Route.ByType].
type typeRoutes map[string]Handler

// handle runs the handler of d's type. The consume loop has already refused every other
// type (the map's keys are the consumer's AcceptTypes), so the wrong_type rejection here
// only answers a caller that drives the handler directly.
func (m typeRoutes) handle(ctx context.Context, d Delivery) error {
	h, ok := m[d.Event.Type]
	if !ok {
		return cloudevent.ExpectType(d.Event, slices.Sorted(maps.Keys(m))...)
	}
	return h(ctx, d)
}

// Consumers is a service's running consume loops, stopped together.
type Consumers struct {
	subs []*Subscription
}

// Start applies opts (and each route's own [Route.Delivery] after them) to every route and
// starts their consume loops in order. A malformed
// route (see [Route]) fails Start before any loop starts. If one fails to start, the
// loops already running are stopped (gracefully, without ctx's cancellation) and the
// error names the durable. ctx is the hard-stop context of the handlers; use
// [Consumers.Stop] for a graceful stop.
func Start(ctx context.Context, js jetstream.JetStream, opts DeliveryOptions, routes []Route, log zerolog.Logger) (*Consumers, error) {
	specs := make([]ConsumerSpec, len(routes))
	handlers := make([]Handler, len(routes))
	for i, r := range routes {
		spec, h, err := r.consumer()
		if err != nil {
			return nil, err
		}
		o := opts.With(r.Delivery...)
		spec.AckWait, spec.MaxDeliver, spec.BackOff = o.AckWait, o.MaxDeliver, o.BackOff
		spec.Workers, spec.Names, spec.Observer = o.Workers, o.Names, o.Observer
		spec.HandlerTimeout = o.HandlerTimeout
		if r.shared != nil {
			r.shared.size(spec.Workers)
			spec.Limit = r.shared
		}
		specs[i], handlers[i] = spec, h
	}
	c := &Consumers{}
	for i, spec := range specs {
		sub, err := Consume(ctx, js, spec, handlers[i], log)
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

// WithWorkers sets how many messages each consumer handles at once in this process (a
// route's partitions together: [PerPartition]); n ≤ 0 keeps the default. Pipeline handlers are idempotent and serialise on their
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

// PerPartition returns route(pn) for the names pn of every partition of names, partition
// 0 first: a consumer of a partitioned store (a record stream of the calls, runs or
// batches buckets) is one durable per partition's stream. A durable's name is per stream,
// so every partition's keeps the route's name. The partitions' consumers share one
// handler limit of the route's Workers ([ConsumerSpec.Limit]): the worker count bounds
// the route's handlers in the process over all partitions, as with one partition.
func PerPartition(names contracts.Names, route func(pn contracts.Names) Route) []Route {
	routes := make([]Route, 0, names.PartitionCount())
	shared := &HandlerLimit{}
	for _, pn := range names.EachPartition() {
		r := route(pn)
		if names.PartitionCount() > 1 {
			r.shared = shared
		}
		routes = append(routes, r)
	}
	return routes
}
