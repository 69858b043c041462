package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestStartAppliesOneSetOfDeliveryOptionsToEveryRoute starts two consumers with one set of
// delivery options, checks that each consumer got them and handles its own messages, and
// that one Stop ends both loops.
func TestStartAppliesOneSetOfDeliveryOptionsToEveryRoute(t *testing.T) {
	h := newHarness(t)
	var gate, tickets recorder
	route := func(durable, filter, typ string, rec *recorder) bus.Route {
		return bus.Route{Spec: bus.ConsumerSpec{
			Stream: testStream(h.names), Durable: durable, FilterSubjects: []string{filter}, AcceptTypes: []string{typ},
			AckWait: time.Hour, MaxDeliver: 99, // overwritten by the options
		}, Handler: func(_ context.Context, d bus.Delivery) error { rec.add(d); return nil }}
	}
	opts := bus.DeliveryOptions{AckWait: 7 * time.Second, MaxDeliver: 3, BackOff: []time.Duration{10 * time.Millisecond}, Workers: 2, Names: h.names}
	cs, err := bus.Start(h.ctx, h.js, opts, []bus.Route{
		route("rt-gate", testSubject(h.names, "run-1"), testType, &gate),
		route("rt-out", h.names.Prefix+".work.output.run-1", contracts.TypeCallOutput, &tickets),
	}, h.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, durable := range []string{"rt-gate", "rt-out"} {
		c, err := h.js.Consumer(h.ctx, testStream(h.names), durable)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := c.CachedInfo().Config; cfg.AckWait != opts.AckWait {
			t.Fatalf("%s: ack wait %v, want the shared %v", durable, cfg.AckWait, opts.AckWait)
		}
	}
	h.publish(testSubject(h.names, "run-1"), h.event("g-1", 1))
	out, err := cloudevent.NewEvent("o-1", "awaken/test", contracts.TypeCallOutput, 2)
	if err != nil {
		t.Fatal(err)
	}
	h.publish(h.names.Prefix+".work.output.run-1", out)
	natstest.WaitFor(t, waitTimeout, func() bool { return gate.count() == 1 && tickets.count() == 1 }, "each route to handle its message")
	if d := gate.all()[0]; d.MaxDeliver != 3 || d.Event.ID != "g-1" {
		t.Fatalf("gate delivery %+v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := cs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cs.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	h.publish(testSubject(h.names, "run-1"), h.event("g-2", 2))
	waitPending(h, "rt-gate", 1, "the stopped consumer to leave the new message pending")
	if gate.count() != 1 {
		t.Fatalf("a stopped consumer handled %d messages", gate.count())
	}
	var none *bus.Consumers
	if err := none.Stop(ctx); err != nil {
		t.Fatalf("stop of nil consumers: %v", err)
	}
}

// TestStartStopsWhatItStartedWhenARouteFails: a route that cannot start (its stream does
// not exist) fails Start with an error naming its durable, and the loop started before it
// is stopped, not leaked.
func TestStartStopsWhatItStartedWhenARouteFails(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	ok := bus.Route{Spec: h.spec("rt-first"), Handler: func(_ context.Context, d bus.Delivery) error { rec.add(d); return nil }}
	bad := bus.Route{Spec: bus.ConsumerSpec{Stream: "NO_SUCH_STREAM", Durable: "rt-broken"}, Handler: func(context.Context, bus.Delivery) error { return nil }}
	_, err := bus.Start(h.ctx, h.js, bus.DeliveryOptions{Names: h.names}, []bus.Route{ok, bad}, h.log)
	if err == nil || !strings.Contains(err.Error(), "rt-broken") || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("start error %v, want one naming rt-broken and wrapping ErrStreamNotFound", err)
	}
	h.publish(testSubject(h.names, "run-1"), h.event("g-1", 1))
	waitPending(h, "rt-first", 1, "the first consumer, stopped, to leave the message pending")
	if rec.count() != 0 {
		t.Fatal("the consumer started before the failing route still runs")
	}
}

// TestStartRoutesEachTypeToItsHandler: a route set up by type hands each delivery to the
// handler of its type, and those types are the consumer's type filter: an event of any
// other type is dead-lettered wrong_type by the filter, no handler run. Start keeps its own
// copy of the map, so a later change to the caller's does not reroute.
func TestStartRoutesEachTypeToItsHandler(t *testing.T) {
	h := newHarness(t)
	const otherType = "io.awaken.test.other.v1"
	var work, other recorder
	byType := map[string]bus.Handler{
		testType:  func(_ context.Context, d bus.Delivery) error { work.add(d); return nil },
		otherType: func(_ context.Context, d bus.Delivery) error { other.add(d); return nil },
	}
	subject := testSubject(h.names, "run-1")
	obs := &testObserver{}
	cs, err := bus.Start(h.ctx, h.js, bus.DeliveryOptions{Names: h.names, Observer: obs}, []bus.Route{{
		Spec:   bus.ConsumerSpec{Stream: testStream(h.names), Durable: "rt-bytype", FilterSubjects: []string{subject}},
		ByType: byType,
	}}, h.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = cs.Stop(ctx)
	})
	byType[otherType] = func(context.Context, bus.Delivery) error {
		t.Error("a change to the caller's map after Start rerouted a delivery")
		return nil
	}

	typed := func(id, typ string) cloudevent.Event {
		e, err := cloudevent.NewEvent(id, "awaken/test", typ, 1)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	h.publish(subject, typed("w-1", testType))
	h.publish(subject, typed("o-1", otherType))
	h.publish(subject, typed("x-1", contracts.TypeCallOutput))
	natstest.WaitFor(t, waitTimeout, func() bool {
		return work.count() == 1 && other.count() == 1 && len(h.streamMsgs(h.names.DeadLetterStream())) == 1
	}, "each routed type handled and the unrouted one dead-lettered")
	if id := work.all()[0].Event.ID; id != "w-1" {
		t.Fatalf("%s handled %s, want w-1", testType, id)
	}
	if id := other.all()[0].Event.ID; id != "o-1" {
		t.Fatalf("%s handled %s, want o-1", otherType, id)
	}
	dl := h.streamMsgs(h.names.DeadLetterStream())[0]
	if code := dl.Header.Get(bus.HeaderDeadCode); code != string(contracts.RejectWrongType) || dl.Header.Get(cloudevent.HeaderID) != "x-1" {
		t.Fatalf("dead letter %s with code %q, want x-1 with %q", dl.Header.Get(cloudevent.HeaderID), code, contracts.RejectWrongType)
	}
	natstest.WaitFor(t, waitTimeout, func() bool { return len(obs.of("x-1")) == 1 }, "the observation of x-1")
	if ob := obs.of("x-1")[0].ob; ob.Handled {
		t.Fatalf("x-1 ran a handler (%+v); the consumer's type filter should have refused it", ob)
	}
}

// TestStartRefusesAMalformedRoute: a route that gives its handler twice (Handler and
// ByType), its types twice (ByType and AcceptTypes) or a ByType entry without a type or a
// handler fails Start with an error naming it, before any consumer starts — the
// well-formed route listed first included.
func TestStartRefusesAMalformedRoute(t *testing.T) {
	h := newHarness(t)
	handle := func(context.Context, bus.Delivery) error { return nil }
	spec := func(accept ...string) bus.ConsumerSpec {
		return bus.ConsumerSpec{Stream: testStream(h.names), Durable: "rt-malformed", FilterSubjects: []string{testSubject(h.names, "run-1")}, AcceptTypes: accept}
	}
	for _, tc := range []struct {
		name  string
		route bus.Route
		want  string
	}{
		{"Handler and ByType", bus.Route{Spec: spec(), Handler: handle, ByType: map[string]bus.Handler{testType: handle}}, "sets both Handler and ByType"},
		{"ByType and AcceptTypes", bus.Route{Spec: spec(testType), ByType: map[string]bus.Handler{testType: handle}}, "sets both ByType and AcceptTypes"},
		{"a nil handler", bus.Route{Spec: spec(), ByType: map[string]bus.Handler{testType: nil}}, "maps " + testType + " to a nil handler"},
		{"an empty type", bus.Route{Spec: spec(), ByType: map[string]bus.Handler{"": handle}}, "ByType has an empty type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := bus.Route{Spec: h.spec("rt-wellformed"), Handler: handle}
			_, err := bus.Start(h.ctx, h.js, bus.DeliveryOptions{Names: h.names}, []bus.Route{first, tc.route}, h.log)
			if err == nil || !strings.Contains(err.Error(), "rt-malformed") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start error %v, want one naming rt-malformed that says %q", err, tc.want)
			}
			for _, durable := range []string{"rt-wellformed", "rt-malformed"} {
				if _, err := h.js.Consumer(h.ctx, testStream(h.names), durable); !errors.Is(err, jetstream.ErrConsumerNotFound) {
					t.Fatalf("consumer %s after a refused Start: %v, want none", durable, err)
				}
			}
		})
	}
}

// waitPending waits until durable on the work stream has n messages pending: delivered
// to no handler.
func waitPending(h *harness, durable string, n uint64, what string) {
	h.t.Helper()
	c, err := h.js.Consumer(h.ctx, testStream(h.names), durable)
	if err != nil {
		h.t.Fatal(err)
	}
	natstest.WaitFor(h.t, waitTimeout, func() bool {
		info, err := c.Info(h.ctx)
		return err == nil && info.NumPending == n
	}, what)
}

func TestDecodeIsStrict(t *testing.T) {
	req, err := bus.Decode[testRequest]([]byte(`{"run_id":"r","step":2,"index":1}`))
	if err != nil || req.RunID != "r" || req.Step != 2 || req.Index != 1 {
		t.Fatalf("decode: %+v, %v", req, err)
	}
	for name, in := range map[string]string{
		"unknown field": `{"run_id":"r","step":2,"index":1,"extra":true}`,
		"trailing data": `{"run_id":"r","step":2,"index":1} {}`,
		"not json":      `{"run_id":`,
		"wrong type":    `{"run_id":1}`,
	} {
		got, err := bus.Decode[testRequest]([]byte(in))
		if err == nil {
			t.Fatalf("%s: decoded %+v", name, got)
		}
		if got != (testRequest{}) {
			t.Fatalf("%s: a failed decode returned %+v", name, got)
		}
	}
	if _, err := bus.Decode[testRequest]([]byte(`{"run_id":"r"} 1`)); !errors.Is(err, bus.ErrTrailingData) {
		t.Fatalf("trailing data: %v", err)
	}
}

// TestPerPartitionRoutesShareTheWorkers: the consumers of one route's partitions together
// run at most the service's worker count of handlers at once, not that many each.
func TestPerPartitionRoutesShareTheWorkers(t *testing.T) {
	h := newHarness(t)
	names := h.names
	names.Partitions = 2
	const workers, perPartition = 2, 4
	var running, most, handled atomic.Int64
	release := make(chan struct{})
	handler := func(context.Context, bus.Delivery) error {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
		handled.Add(1)
		return nil
	}
	subject := func(pn contracts.Names, i int) string {
		return testSubject(h.names, fmt.Sprintf("p%d.run-%d", pn.PartitionIndex(), i))
	}
	routes := bus.PerPartition(names, func(pn contracts.Names) bus.Route {
		spec := h.spec(fmt.Sprintf("rt-part-%d", pn.PartitionIndex()))
		spec.FilterSubjects = []string{testSubject(h.names, fmt.Sprintf("p%d.*", pn.PartitionIndex()))}
		return bus.Route{Spec: spec, Handler: handler}
	})
	opts := bus.DeliveryOptions{AckWait: 30 * time.Second, MaxDeliver: 3, Workers: workers, Names: h.names}
	cs, err := bus.Start(h.ctx, h.js, opts, routes, h.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = cs.Stop(ctx)
	})
	for _, pn := range names.EachPartition() {
		for i := range perPartition {
			h.publish(subject(pn, i), h.event(fmt.Sprintf("p%d-%d", pn.PartitionIndex(), i), i))
		}
	}
	// Each partition's consumer fetches up to the worker count: once both hold that many
	// messages, every handler the process would run is running.
	ackPending := func() int {
		total := 0
		for k := range names.PartitionCount() {
			c, err := h.js.Consumer(h.ctx, testStream(h.names), fmt.Sprintf("rt-part-%d", k))
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Info(h.ctx)
			if err != nil {
				t.Fatal(err)
			}
			total += info.NumAckPending
		}
		return total
	}
	natstest.WaitFor(t, waitTimeout, func() bool {
		return running.Load() >= workers && ackPending() == names.PartitionCount()*workers
	}, "every partition's consumer to hold the worker count of messages")
	close(release)
	natstest.WaitFor(t, waitTimeout, func() bool { return handled.Load() == int64(names.PartitionCount()*perPartition) },
		"every message to be handled")
	if m := most.Load(); m != workers {
		t.Fatalf("at most %d handlers ran at once over %d partitions, want the %d workers", m, names.PartitionCount(), workers)
	}
}
