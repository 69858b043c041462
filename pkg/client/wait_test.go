package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// These tests play the publisher service against a real server: they answer a submission
// by publishing its results on the results stream exactly as the publisher does (one
// results message, or for a batch too large for one the atomic batch of its per-call
// events), or by publishing them in ways the publisher's crashes can, and check what
// SubmitAndWait and Await make of it.

// testEnv is a server with awaken's streams and buckets, a connection playing the
// services (nc, js, pub) and the client under test on a connection of its own.
type testEnv struct {
	t     *testing.T
	nc    *nats.Conn
	js    jetstream.JetStream
	pub   *bus.Publisher
	c     *Client
	names contracts.Names
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Conn(t)
	names := contracts.NewNames("")
	ctx := servicetest.Context(t, 30*time.Second)
	if err := bus.EnsureTopology(ctx, js, names, bus.TopologyConfig{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	cnc, _ := srv.Conn(t)
	c, err := New(cnc)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, nc: nc, js: js, pub: bus.NewPublisher(js), c: c, names: names}
}

// testSubmission is batch step of run with calls calls of echo.
func testSubmission(run string, step int64, calls int) contracts.BatchSubmission {
	sub := contracts.BatchSubmission{RunID: run, ThreadID: "thread-" + run, Step: step}
	for i := range calls {
		sub.Calls = append(sub.Calls, contracts.ToolCall{CallID: "c" + strconv.Itoa(i), ToolID: "echo", Arguments: []byte(`{}`)})
	}
	return sub
}

// batchMessages are the messages the publisher publishes for sub: one result per call in
// model order, then the finalized event, each with its deterministic event id.
func (e *testEnv) batchMessages(sub contracts.BatchSubmission, text string) []bus.Outgoing {
	e.t.Helper()
	var out []bus.Outgoing
	var ids []string
	subject := e.names.ResultsSubject(sub.RunID)
	for i, call := range sub.Calls {
		r := contracts.ToolResultEvent{
			BatchID: sub.BatchID(), RunID: sub.RunID, Index: i, CallID: call.CallID, ToolID: call.ToolID,
			Outcome: contracts.OutcomeCompleted, Output: contracts.TextOutput(call.CallID, text),
		}
		ev, err := cloudevent.NewEvent(fmt.Sprintf("%s:result:%d", sub.BatchID(), i), "test/publisher", contracts.TypeToolResult, r)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, bus.Outgoing{Subject: subject, Event: ev})
		ids = append(ids, call.CallID)
	}
	f := contracts.BatchFinalized{BatchID: sub.BatchID(), RunID: sub.RunID, ThreadID: sub.ThreadID, Step: sub.Step, CallIDs: ids}
	ev, err := cloudevent.NewEvent(sub.BatchID()+":finalized", "test/publisher", contracts.TypeBatchFinalized, f)
	if err != nil {
		e.t.Fatal(err)
	}
	return append(out, bus.Outgoing{Subject: subject, Event: ev})
}

// resultsMessage is the one results message the publisher publishes for sub (the form of
// every batch that fits one message).
func (e *testEnv) resultsMessage(sub contracts.BatchSubmission, text string) bus.Outgoing {
	e.t.Helper()
	parts := e.batchMessages(sub, text)
	b := contracts.BatchResults{BatchID: sub.BatchID(), RunID: sub.RunID}
	for _, o := range parts[:len(parts)-1] {
		var r contracts.ToolResultEvent
		if err := json.Unmarshal(o.Event.Data, &r); err != nil {
			e.t.Fatal(err)
		}
		b.Results = append(b.Results, r)
	}
	if err := json.Unmarshal(parts[len(parts)-1].Event.Data, &b.Finalized); err != nil {
		e.t.Fatal(err)
	}
	ev, err := cloudevent.NewEvent(sub.BatchID()+":results", "test/publisher", contracts.TypeBatchResults, b)
	if err != nil {
		e.t.Fatal(err)
	}
	return bus.Outgoing{Subject: parts[0].Subject, Event: ev}
}

// publish publishes the results of sub in one of the publisher's forms: one results
// message, or (atomic) the atomic batch of per-call events.
func (e *testEnv) publish(ctx context.Context, sub contracts.BatchSubmission, text string, atomic bool) error {
	if atomic {
		return e.pub.PublishAtomic(ctx, e.batchMessages(sub, text))
	}
	o := e.resultsMessage(sub, text)
	_, err := e.pub.Publish(ctx, o.Subject, o.Event)
	return err
}

// onSubmit calls answer with each submission that reaches the submit subject. The test
// waits for every answer to finish before the connections close: a client sees the
// republished results before the publisher has its acknowledgement.
func (e *testEnv) onSubmit(answer func(contracts.BatchSubmission)) {
	e.t.Helper()
	var answering sync.WaitGroup
	e.t.Cleanup(answering.Wait)
	s, err := e.nc.Subscribe(e.names.SubmitSubject(), func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil {
			return
		}
		var sub contracts.BatchSubmission
		if err := json.Unmarshal(ev.Data, &sub); err != nil {
			return
		}
		answering.Go(func() { answer(sub) })
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

// waitConsumersDeleted waits until the results stream has no consumer left: every read
// deletes its ordered consumer when done.
func (e *testEnv) waitConsumersDeleted(msg string) {
	e.t.Helper()
	natstest.WaitFor(e.t, 10*time.Second, func() bool { return e.consumers() == 0 }, msg)
}

func (e *testEnv) consumers() int {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), e.names.ResultsStream())
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Consumers
}

// checkResults checks that a read of sub's results (res, err) succeeded with one result of
// text per call, in model order.
func checkResults(t *testing.T, res *BatchResult, err error, sub contracts.BatchSubmission, text string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.BatchID != sub.BatchID() || len(res.Results) != len(sub.Calls) || len(res.Finalized.CallIDs) != len(sub.Calls) {
		t.Fatalf("result of %s: %+v", sub.BatchID(), res)
	}
	for i, r := range res.Results {
		if r.Index != i || r.CallID != sub.Calls[i].CallID || len(r.Output.Content) != 1 || r.Output.Content[0].Text != text {
			t.Fatalf("result %d: %+v, want call %s with %q", i, r, sub.Calls[i].CallID, text)
		}
	}
}

func TestSubmitAndWaitReadsACommittedBatchWithoutAConsumer(t *testing.T) {
	e := newTestEnv(t)
	// Odd steps are published as one results message, even ones as an atomic batch.
	e.onSubmit(func(sub contracts.BatchSubmission) {
		if err := e.publish(context.Background(), sub, "ok", sub.Step%2 == 0); err != nil {
			t.Error(err)
		}
	})
	ctx := servicetest.Context(t, 30*time.Second)
	for i := range 5 {
		sub := testSubmission("run-fast", int64(i+1), 3)
		res, err := e.c.SubmitAndWait(ctx, sub)
		checkResults(t, res, err, sub, "ok")
	}
	// The shortcut creates no consumer at all: a platform submitting thousands of batches
	// a minute must not run into the stream's consumer limit.
	if n := e.consumers(); n != 0 {
		t.Fatalf("the results stream has %d consumers after five SubmitAndWait, want 0", n)
	}
}

// A publisher that crashes half-way through its atomic publish leaves messages that the
// stream never committed. SubmitAndWait must not report them: it returns what the
// publisher's retry commits.
func TestSubmitAndWaitDoesNotReportAnUncommittedPublish(t *testing.T) {
	e := newTestEnv(t)
	e.onSubmit(func(sub contracts.BatchSubmission) {
		// The first attempt: every message of an atomic batch, but no commit.
		for i, o := range e.batchMessages(sub, "uncommitted") {
			m := cloudevent.EncodeMsg(o.Subject, o.Event)
			m.Header.Set("Nats-Batch-Id", "crashed-"+sub.BatchID())
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
			if err := e.nc.PublishMsg(m); err != nil {
				t.Error(err)
			}
		}
		// The retry, committed.
		if err := e.pub.PublishAtomic(context.Background(), e.batchMessages(sub, "committed")); err != nil {
			t.Error(err)
		}
	})
	ctx := servicetest.Context(t, 30*time.Second)
	sub := testSubmission("run-crash", 1, 2)
	res, err := e.c.SubmitAndWait(ctx, sub)
	checkResults(t, res, err, sub, "committed")
}

// A batch whose results did not all reach the subscription (an atomic batch, run-gap-2)
// is read from the stream. (For run-gap-1, one results message, the hook stands for a
// message that arrived but was not whole.)
func TestSubmitAndWaitReadsTheStreamWhenTheSubscriptionMissedAResult(t *testing.T) {
	for i, atomic := range []bool{false, true} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) {
			testSubscriptionMissedAResult(t, fmt.Sprintf("run-gap-%d", i+1), atomic)
		})
	}
}

func testSubscriptionMissedAResult(t *testing.T, run string, atomic bool) {
	e := newTestEnv(t)
	e.onSubmit(func(sub contracts.BatchSubmission) {
		if err := e.publish(context.Background(), sub, "ok", atomic); err != nil {
			t.Error(err)
		}
	})
	// The second result does not reach the subscription, as if lost on a cluster route.
	e.c.dropResult = func(r contracts.ToolResultEvent) bool { return r.Index == 1 }
	ctx := servicetest.Context(t, 30*time.Second)
	sub := testSubmission(run, 1, 3)
	res, err := e.c.SubmitAndWait(ctx, sub)
	checkResults(t, res, err, sub, "ok")
	e.waitConsumersDeleted("the ordered consumer was not deleted")
}

func TestAwaitDeletesItsConsumer(t *testing.T) {
	e := newTestEnv(t)
	ctx := servicetest.Context(t, 30*time.Second)
	for i := range 3 {
		sub := testSubmission("run-await", int64(i+1), 2)
		if err := e.publish(ctx, sub, "ok", false); err != nil {
			t.Fatal(err)
		}
		res, err := e.c.Await(ctx, sub.RunID, sub.Step)
		checkResults(t, res, err, sub, "ok")
	}
	e.waitConsumersDeleted("Await left its ordered consumers on the server")
}

// Identical content submitted before under another event id (a simple client may use the
// bare batch id) is a no-op for the batcher: no new results, no rejection.
// SubmitAndWait must still return the results the first submission produced.
func TestSubmitAndWaitFindsTheResultsOfAnIdenticalEarlierSubmission(t *testing.T) {
	e := newTestEnv(t)
	ctx := servicetest.Context(t, 30*time.Second)
	// A stand-in for the batcher: it answers the first submission of a batch and settles
	// every later one without results, as the real batcher does.
	cons, err := e.js.CreateConsumer(ctx, e.names.SubmissionsStream(), jetstream.ConsumerConfig{
		Durable: contracts.ConsumerBatcherSubmit, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data())
		var sub contracts.BatchSubmission
		if err == nil && json.Unmarshal(ev.Data, &sub) == nil && !seen[sub.BatchID()] {
			seen[sub.BatchID()] = true
			// Not the test's context: this answer may still be settling when the test ends.
			pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.publish(pctx, sub, "first", false); err != nil {
				t.Error(err)
			}
		}
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cc.Stop()
		<-cc.Closed() // no answer runs after the test
	}()

	sub := testSubmission("run-identical", 1, 2)
	ev, err := cloudevent.NewEvent(sub.BatchID(), "test/simple-client", contracts.TypeBatchRequested, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.PublishMsg(ctx, cloudevent.EncodeMsg(e.names.SubmitSubject(), ev)); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 10*time.Second, func() bool {
		f, err := e.c.lastFinalized(ctx, sub.RunID)
		return err == nil && f != nil
	}, "the first submission was not answered")
	e.c.hedgeAfter = time.Hour // found by asking, not by the hedge
	res, err := e.c.SubmitAndWait(ctx, sub)
	checkResults(t, res, err, sub, "first")
}

// FollowRun yields every batch of a run whole and in order, whichever form it was
// published in, resumes exactly after the batch whose Sequence it is given, and never
// yields the tail of a batch it started inside of; Results reads a published batch
// without waiting and says ErrNotPublished otherwise. Batch 3 is an atomic batch of
// per-call events, the others one results message each.
func TestFollowRunResumesAfterASequenceAndResultsDoesNotWait(t *testing.T) {
	e := newTestEnv(t)
	ctx := servicetest.Context(t, 30*time.Second)
	const run = "run-follow"
	publish := func(step int64) {
		t.Helper()
		sub := testSubmission(run, step, 2)
		if err := e.publish(ctx, sub, fmt.Sprint("step ", step), step == 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.c.Results(ctx, run, 1); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("Results of an empty run: %v, want ErrNotPublished", err)
	}
	publish(1)
	publish(2)
	if _, err := e.c.Results(ctx, run, 3); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("Results of an unpublished batch: %v, want ErrNotPublished", err)
	}
	res, err := e.c.Results(ctx, run, 2)
	checkResults(t, res, err, testSubmission(run, 2, 2), "step 2")

	follow := func(after uint64, n int) []*BatchResult {
		t.Helper()
		var got []*BatchResult
		err := e.c.FollowRun(ctx, run, after, func(b *BatchResult) bool {
			got = append(got, b)
			return len(got) < n
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := follow(0, 2)
	if all[0].BatchID != contracts.BatchID(run, 1) || all[1].BatchID != contracts.BatchID(run, 2) || all[0].Sequence >= all[1].Sequence {
		t.Fatalf("followed %+v", all)
	}
	publish(3)
	next := follow(all[1].Sequence, 1)
	if next[0].BatchID != contracts.BatchID(run, 3) || len(next[0].Results) != 2 {
		t.Fatalf("after batch 2: %+v", next[0])
	}
	// Started inside batch 3 (after its first result): batch 3 is not yielded, batch 4 is.
	publish(4)
	mid := follow(all[1].Sequence+1, 1)
	if mid[0].BatchID != contracts.BatchID(run, 4) {
		t.Fatalf("a read started inside batch 3 yielded %s first", mid[0].BatchID)
	}
	e.waitConsumersDeleted("FollowRun and Results left ordered consumers on the server")
}

// TestSubmitAndWaitPendingNamesTheOpenTickets: when the wait ends on a batch parked on a
// ticket, SubmitAndWait's error is a *PendingError (still ErrPending) carrying the batch's
// open tickets — and only that batch's — so a Go caller knows what holds it.
func TestSubmitAndWaitPendingNamesTheOpenTickets(t *testing.T) {
	e := newTestEnv(t)
	ctx := servicetest.Context(t, 30*time.Second)
	sub := testSubmission("run-parked", 1, 2)
	kv, err := e.js.KeyValue(ctx, e.names.TicketsBucket())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	// Tickets as the gate opens them: one of this batch, one of the run's next step.
	var want contracts.ResumeTicket
	for _, step := range []int64{1, 2} {
		tk := contracts.ResumeTicket{
			CorrelationID: contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, step, "c2"), RunID: sub.RunID,
			BatchID: contracts.BatchID(sub.RunID, step), CallID: "c2", ToolID: "echo", Reason: contracts.ReasonPermission,
			Deadline: &deadline, OpenedAt: time.Now().UTC(),
		}
		if _, err := kv.Put(ctx, tk.CorrelationID, mustMarshal(t, tk)); err != nil {
			t.Fatal(err)
		}
		if step == 1 {
			want = tk
		}
	}
	_, err = e.c.SubmitAndWait(ctx, sub, WaitAtMost(50*time.Millisecond))
	var pe *PendingError
	if !errors.Is(err, ErrPending) || !errors.As(err, &pe) {
		t.Fatalf("SubmitAndWait of a parked batch: %v, want a *PendingError wrapping ErrPending", err)
	}
	if pe.BatchID != sub.BatchID() || len(pe.Tickets) != 1 || pe.Tickets[0].CorrelationID != want.CorrelationID ||
		pe.Tickets[0].Deadline == nil || !pe.Tickets[0].Deadline.Equal(deadline) {
		t.Fatalf("pending error %+v, want batch %s and its ticket %s", pe, sub.BatchID(), want.CorrelationID)
	}
	if !strings.Contains(err.Error(), want.CorrelationID) {
		t.Errorf("the pending error says %q, want it to name the ticket %s", err, want.CorrelationID)
	}
	if ts, err := e.c.BatchTickets(ctx, "run-without-tickets", 1); err != nil || len(ts) != 0 {
		t.Errorf("the tickets of a batch without any: %v, %v; want none", ts, err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
