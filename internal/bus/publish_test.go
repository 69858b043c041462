package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestEnsureTopology(t *testing.T) {
	h := newHarness(t) // already ran EnsureTopology once

	// Idempotent, also when several services race at start-up.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() { errs <- bus.EnsureTopology(h.ctx, h.js, h.names, bus.TopologyConfig{}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureTopology: %v", err)
		}
	}

	p := h.names.Prefix
	tests := []struct {
		stream  string
		subject string
		check   func(c jetstream.StreamConfig) error
	}{
		{h.names.SubmissionsStream(), p + ".batches.>", func(c jetstream.StreamConfig) error {
			if c.Retention != jetstream.LimitsPolicy || c.MaxAge != bus.DefaultSubmissionsMaxAge {
				return fmt.Errorf("submissions retention %v max age %s", c.Retention, c.MaxAge)
			}
			return nil
		}},
		{h.names.ResultsStream(), p + ".results.>", func(c jetstream.StreamConfig) error {
			if !c.AllowAtomicPublish || c.Duplicates != bus.DefaultDuplicates {
				return fmt.Errorf("results atomic %v duplicates %s", c.AllowAtomicPublish, c.Duplicates)
			}
			return nil
		}},
		{h.names.TicketsStream(), p + ".tickets.opened", func(c jetstream.StreamConfig) error {
			// Only the gate's records: no resume command, which clients publish, shares
			// the stream's duplicate window with them.
			if c.AllowMsgSchedules || c.MaxAge != bus.DefaultTicketsMaxAge || len(c.Subjects) != 3 ||
				slices.Contains(c.Subjects, h.names.TicketResumeSubject()) || slices.Contains(c.Subjects, h.names.TicketResumeAPISubject()) {
				return fmt.Errorf("tickets schedules %v max age %s subjects %v", c.AllowMsgSchedules, c.MaxAge, c.Subjects)
			}
			return nil
		}},
		{h.names.TimersStream(), p + ".tickets.timer", func(c jetstream.StreamConfig) error {
			if !c.AllowMsgSchedules || !c.AllowMsgTTL || c.MaxAge != 0 || len(c.Subjects) != 2 {
				return fmt.Errorf("timers schedules %v ttl %v max age %s subjects %v", c.AllowMsgSchedules, c.AllowMsgTTL, c.MaxAge, c.Subjects)
			}
			return nil
		}},
		{h.names.ControlStream(), p + ".runs.>", func(c jetstream.StreamConfig) error {
			// The clients' commands, resume commands on both subjects among them: message
			// schedules refused, as on every stream clients write.
			if c.AllowMsgSchedules || len(c.Subjects) != 3 ||
				!slices.Contains(c.Subjects, h.names.TicketResumeSubject()) || !slices.Contains(c.Subjects, h.names.TicketResumeAPISubject()) {
				return fmt.Errorf("control schedules %v subjects %v", c.AllowMsgSchedules, c.Subjects)
			}
			return nil
		}},
		{h.names.EventsStream(), p + ".events.>", nil},
		{h.names.AuditStream(), p + ".audit.>", nil},
		{h.names.ClaimsStream(), p + ".claims.>", nil},
		{h.names.DeadLetterStream(), p + ".deadletter.>", nil},
	}
	for _, tc := range tests {
		t.Run(tc.stream, func(t *testing.T) {
			st, err := h.js.Stream(h.ctx, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			c := st.CachedInfo().Config
			if len(c.Subjects) == 0 || c.Subjects[0] != tc.subject || len(c.Subjects) > 1 && tc.check == nil {
				t.Fatalf("subjects %v, want [%s ...]", c.Subjects, tc.subject)
			}
			if c.Storage != jetstream.FileStorage || c.Replicas != 1 {
				t.Fatalf("storage %v replicas %d", c.Storage, c.Replicas)
			}
			if tc.check != nil {
				if err := tc.check(c); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	for _, b := range []string{h.names.BatchesBucket(), h.names.CallsBucket(), h.names.TicketsBucket(), h.names.CountersBucket()} {
		if _, err := h.js.KeyValue(h.ctx, b); err != nil {
			t.Fatalf("bucket %s: %v", b, err)
		}
	}

	// A changed configuration is applied to the existing streams.
	if err := bus.EnsureTopology(h.ctx, h.js, h.names, bus.TopologyConfig{SubmissionsMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	st, err := h.js.Stream(h.ctx, h.names.SubmissionsStream())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.MaxAge; got != time.Hour {
		t.Fatalf("submissions max age after update = %s, want 1h", got)
	}
}

// An older topology kept the ticket timers in the tickets stream ("{prefix}.tickets.>",
// message schedules on). The server cannot turn schedules off in place, so EnsureTopology
// refuses with a typed error naming the stream instead of running with a stream on which
// clients may schedule; once the operator removed the stream, it builds the split topology.
func TestEnsureTopologyRefusesAnOlderTicketsStreamThatAllowsSchedules(t *testing.T) {
	h := newHarness(t)
	old := contracts.NewNames("old")
	if _, err := h.js.CreateStream(h.ctx, jetstream.StreamConfig{Name: old.TicketsStream(),
		Subjects: []string{"old.tickets.>"}, AllowMsgSchedules: true, AllowMsgTTL: true, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	err := bus.EnsureTopology(h.ctx, h.js, old, bus.TopologyConfig{})
	if !errors.Is(err, bus.ErrSchedulesStillAllowed) || !strings.Contains(err.Error(), old.TicketsStream()) {
		t.Fatalf("EnsureTopology on an older tickets stream: %v, want ErrSchedulesStillAllowed naming it", err)
	}
	if err := h.js.DeleteStream(h.ctx, old.TicketsStream()); err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(h.ctx, h.js, old, bus.TopologyConfig{}); err != nil {
		t.Fatalf("after the operator removed the stream: %v", err)
	}
	st, err := h.js.Stream(h.ctx, old.TicketsStream())
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.AllowMsgSchedules || slices.Contains(c.Subjects, "old.tickets.>") {
		t.Fatalf("tickets stream: schedules %v subjects %v", c.AllowMsgSchedules, c.Subjects)
	}
	if _, err := h.js.Stream(h.ctx, old.TimersStream()); err != nil {
		t.Fatalf("timers stream: %v", err)
	}
}

func TestEnsureTopologyPrefixesAreIndependent(t *testing.T) {
	h := newHarness(t)
	other := contracts.NewNames("other")
	if err := bus.EnsureTopology(h.ctx, h.js, other, bus.TopologyConfig{}); err != nil {
		t.Fatalf("a second prefix on the same server: %v", err)
	}
	h.publish(other.RunCancelSubject(), h.event("x-1", 1))
	if n := len(h.streamMsgs(other.ControlStream())); n != 1 {
		t.Fatalf("other control stream has %d messages", n)
	}
	if n := len(h.streamMsgs(h.names.ControlStream())); n != 0 {
		t.Fatalf("default control stream has %d messages", n)
	}
}

func TestPublishDeduplicatesByEventID(t *testing.T) {
	h := newHarness(t)
	e := h.event("op-1:gate", map[string]string{"a": "b"})
	subj := testSubject(h.names, "run-1")
	ack1, err := h.pub.Publish(h.ctx, subj, e)
	if err != nil {
		t.Fatal(err)
	}
	ack2, err := h.pub.Publish(h.ctx, subj, e)
	if err != nil {
		t.Fatalf("duplicate publish must succeed: %v", err)
	}
	if ack1.Duplicate || !ack2.Duplicate || ack2.Sequence != ack1.Sequence {
		t.Fatalf("acks %+v %+v, want the second to be a duplicate of the first", ack1, ack2)
	}
	msgs := h.streamMsgs(testStream(h.names))
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d messages, want 1", len(msgs))
	}
	got, err := cloudevent.DecodeMsg(msgs[0].Header, msgs[0].Data)
	if err != nil || got.ID != e.ID || string(got.Data) != string(e.Data) {
		t.Fatalf("stored event %+v err %v", got, err)
	}
}

func TestPublishAll(t *testing.T) {
	h := newHarness(t)
	var out []bus.Outgoing
	for i := range 20 {
		out = append(out, bus.Outgoing{Subject: h.names.EventsSubject("run-1"), Event: h.event(fmt.Sprintf("ev-%d", i), i)})
	}
	out = append(out, out[3]) // a duplicate inside the same call is fine
	if err := h.pub.PublishAll(h.ctx, out); err != nil {
		t.Fatal(err)
	}
	if n := len(h.streamMsgs(h.names.EventsStream())); n != 20 {
		t.Fatalf("events stream holds %d messages, want 20", n)
	}
	// A subject no stream captures fails, and the error names the event.
	err := h.pub.PublishAll(h.ctx, []bus.Outgoing{
		{Subject: h.names.EventsSubject("run-1"), Event: h.event("ev-ok", 1)},
		{Subject: "nowhere.at.all", Event: h.event("ev-lost", 1)},
	})
	if err == nil || !strings.Contains(err.Error(), "ev-lost") {
		t.Fatalf("err = %v, want a failure naming ev-lost", err)
	}
	if err := h.pub.PublishAll(h.ctx, nil); err != nil {
		t.Fatalf("empty PublishAll: %v", err)
	}
}

// TestPublishLive: live messages reach a subscriber in order, as CloudEvents with the
// injector's attributes, and no stream stores them (the facts subject is none's).
func TestPublishLive(t *testing.T) {
	h := newHarness(t)
	pub := h.pub.WithInjector(func(_ context.Context, e *cloudevent.Event) {
		e.Extensions["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	})
	sub, err := h.nc.SubscribeSync(h.names.FactsWildcard())
	if err != nil {
		t.Fatal(err)
	}
	var out []bus.Outgoing
	for i := range 3 {
		out = append(out, bus.Outgoing{Subject: h.names.FactsSubject("run-1"), Event: h.event(fmt.Sprintf("fact-%d", i), i)})
	}
	if err := pub.PublishLive(h.ctx, out); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil || ev.ID != fmt.Sprintf("fact-%d", i) || ev.Extensions["traceparent"] == "" {
			t.Fatalf("live message %d: %+v (%v), want fact-%d with its trace context", i, ev, err, i)
		}
	}
	for name := range h.js.StreamNames(h.ctx).Name() {
		st, err := h.js.Stream(h.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("stream %s stores %d messages, want none", name, n)
		}
	}
	if err := h.pub.PublishLive(h.ctx, nil); err != nil {
		t.Fatalf("empty PublishLive: %v", err)
	}
}

func resultsBatch(h *harness, run string, n int) []bus.Outgoing {
	var out []bus.Outgoing
	for i := range n {
		typ := contracts.TypeToolResult
		if i == n-1 {
			typ = contracts.TypeBatchFinalized
		}
		e, err := cloudevent.NewEvent(fmt.Sprintf("tool-batch:%s:1:result:%d", run, i), "awaken/publisher", typ, map[string]int{"index": i})
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, bus.Outgoing{Subject: h.names.ResultsSubject(run), Event: e})
	}
	return out
}

func TestPublishAtomic(t *testing.T) {
	h := newHarness(t)
	batch := resultsBatch(h, "run-1", 3)
	if err := h.pub.PublishAtomic(h.ctx, batch); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		msgs := h.streamMsgs(h.names.ResultsStream())
		if len(msgs) != 3 {
			t.Fatalf("results stream holds %d messages, want 3", len(msgs))
		}
		for i, m := range msgs {
			e, err := cloudevent.DecodeMsg(m.Header, m.Data)
			if err != nil {
				t.Fatal(err)
			}
			if e.ID != batch[i].Event.ID {
				t.Fatalf("message %d is %s, want %s (order lost)", i, e.ID, batch[i].Event.ID)
			}
		}
	}
	check()

	// The same batch again — a publisher that crashed after the commit — is refused whole.
	err := h.pub.PublishAtomic(h.ctx, resultsBatch(h, "run-1", 3))
	if !errors.Is(err, bus.ErrAtomicDuplicate) {
		t.Fatalf("re-publish err = %v, want ErrAtomicDuplicate", err)
	}
	check()

	// Another batch still goes through.
	if err := h.pub.PublishAtomic(h.ctx, resultsBatch(h, "run-2", 2)); err != nil {
		t.Fatal(err)
	}
	if n := len(h.streamMsgs(h.names.ResultsStream())); n != 5 {
		t.Fatalf("results stream holds %d messages, want 5", n)
	}
}

func TestPublishAtomicRefusals(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name string
		out  []bus.Outgoing
	}{
		{"empty batch", nil},
		{"over the server limit", resultsBatch(h, "run-big", bus.MaxAtomicBatch+1)},
		{"stream without atomic publish", []bus.Outgoing{{Subject: h.names.EventsSubject("r"), Event: h.event("e-1", 1)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := h.pub.PublishAtomic(h.ctx, tc.out)
			if err == nil || errors.Is(err, bus.ErrAtomicDuplicate) {
				t.Fatalf("err = %v, want a refusal", err)
			}
		})
	}
	if n := len(h.streamMsgs(h.names.ResultsStream())); n != 0 {
		t.Fatalf("results stream holds %d messages after refusals", n)
	}
}

func TestPublishScheduled(t *testing.T) {
	h := newHarness(t)
	target := h.names.TicketExpireSubject()
	e, err := cloudevent.NewEvent("ticket-1:expire", "awaken/gate", contracts.TypeTicketExpire, map[string]string{"correlation_id": "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(2 * time.Second).Truncate(time.Second)
	if err := h.pub.PublishScheduled(h.ctx, h.names.TicketScheduleSubject("c-1"), target, at, e); err != nil {
		t.Fatal(err)
	}
	// Re-publishing the same schedule is deduplicated.
	if err := h.pub.PublishScheduled(h.ctx, h.names.TicketScheduleSubject("c-1"), target, at, e); err != nil {
		t.Fatal(err)
	}

	cons, err := h.js.OrderedConsumer(h.ctx, h.names.TimersStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{target}})
	if err != nil {
		t.Fatal(err)
	}
	var got jetstream.Msg
	var arrived time.Time
	natstest.WaitFor(t, waitTimeout, func() bool {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			got, arrived = m, time.Now()
		}
		return got != nil
	}, "the scheduled event on its target subject")

	if early := at.Sub(arrived); early > 100*time.Millisecond {
		t.Fatalf("delivered %s before its time", early)
	}
	if late := arrived.Sub(at); late > 5*time.Second {
		t.Fatalf("delivered %s late", late)
	}
	ev, err := cloudevent.DecodeMsg(got.Headers(), got.Data())
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != e.ID || ev.Type != contracts.TypeTicketExpire || string(ev.Data) != string(e.Data) {
		t.Fatalf("delivered event %+v", ev)
	}
	// Exactly one delivery despite the duplicate schedule publish.
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		t.Fatalf("a second delivery on the target: %v", m.Headers())
	}
}

// TestPublishWithoutAckIsBounded: a publish whose acknowledgement never comes (a stream
// leader that stopped after receiving it) fails after bus.PublishAckTimeout while the
// caller's context is still alive, instead of holding the handler for its whole deadline.
func TestPublishWithoutAckIsBounded(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := srv.Conn(t)
	// Something that never answers takes the subject: the publish is received, never acked.
	natstest.Silence(t, nc, "silent.>")
	ev, err := cloudevent.NewEvent("e-1", "awaken/test", "io.awaken.test.v1", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	// The bound under test is the publisher's (PublishAckTimeout by default); a short one
	// keeps the test from waiting ten seconds for it.
	const bound = 300 * time.Millisecond
	caller, cancel := context.WithTimeout(context.Background(), 100*bound)
	defer cancel()
	_, err = bus.NewPublisher(js).WithAckTimeout(bound).Publish(caller, "silent.one", ev)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("publish without an ack: %v, want an error matching context.DeadlineExceeded", err)
	}
	if caller.Err() != nil {
		t.Fatal("publish without an ack waited out the caller's deadline")
	}
}
