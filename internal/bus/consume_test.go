package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestConsumeSuccessAcks(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	var ctxLogged atomic.Bool
	sub := h.consume(h.spec("ok"), func(ctx context.Context, d bus.Delivery) error {
		zerolog.Ctx(ctx).Info().Msg("handling")
		ctxLogged.Store(true)
		rec.add(d)
		return nil
	})
	for i := range 3 {
		h.publish(testSubject(h.names, "run-1"), h.event(fmt.Sprintf("op-%d", i), i))
	}
	info := h.settled(sub)
	if rec.count() != 3 || info.NumRedelivered != 0 || info.AckFloor.Consumer != 3 {
		t.Fatalf("handled %d, redelivered %d, ack floor %d; want 3, 0, 3", rec.count(), info.NumRedelivered, info.AckFloor.Consumer)
	}
	d := rec.all()[0]
	if d.Event.ID != "op-0" || d.Subject != testSubject(h.names, "run-1") || d.NumDelivered != 1 ||
		d.MaxDeliver != 5 || d.Consumer != "ok" || d.Stream != testStream(h.names) || d.StreamSeq != 1 {
		t.Fatalf("delivery %+v", d)
	}

	// The handler's context logger carries the delivery's fields.
	var line map[string]any
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, `"handling"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if !ctxLogged.Load() || line == nil {
		t.Fatalf("no handler log line in %s", h.logs.String())
	}
	for _, f := range []string{"consumer", "subject", "ce_id", "ce_type", "delivered"} {
		if _, ok := line[f]; !ok {
			t.Fatalf("handler log line lacks %q: %v", f, line)
		}
	}
}

func TestConsumeTransientErrorIsRedelivered(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	sub := h.consume(h.spec("transient"), func(ctx context.Context, d bus.Delivery) error {
		if rec.add(d) == 1 {
			return errors.New("database hiccup")
		}
		return nil
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-1", 1))
	h.settled(sub)
	rec.waitRedelivered(t, "a second delivery")
	if dl := h.streamMsgs(h.names.DeadLetterStream()); len(dl) != 0 {
		t.Fatalf("a transient failure was dead-lettered")
	}
}

func TestConsumeRejectionDeadLettersAndMovesOn(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	var rejected lines
	spec := h.spec("reject")
	spec.OnReject = func(ctx context.Context, d bus.Delivery, rej *contracts.Rejection) error {
		rejected.addf("%s/%s", d.Event.ID, rej.Code)
		return nil
	}
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		rec.add(d)
		switch d.Event.ID {
		case "bad-call":
			return fmt.Errorf("validating: %w", contracts.Reject(contracts.RejectInvalidID, "call id %q is not subject-safe", "a b"))
		case "broken":
			return bus.Permanent(errors.New("record is corrupt"))
		}
		return nil
	})

	subj := testSubject(h.names, "run-1")
	h.publish(subj, h.event("bad-call", map[string]string{"call_id": "a b"}))
	// Not a CloudEvent at all.
	raw := nats.NewMsg(subj)
	raw.Header.Set("X-Custom", "kept")
	raw.Data = []byte("garbage")
	if _, err := h.js.PublishMsg(h.ctx, raw); err != nil {
		t.Fatal(err)
	}
	// A CloudEvent of a type this consumer does not take.
	wrong, _ := cloudevent.NewEvent("wrong-type", "awaken/test", contracts.TypeExecRequest, 1)
	h.publish(subj, wrong)
	h.publish(subj, h.event("broken", 1))
	h.publish(subj, h.event("good", 1))

	info := h.settled(sub)
	if info.NumRedelivered != 0 {
		t.Fatalf("rejections were redelivered: %d", info.NumRedelivered)
	}
	var handled []string
	for _, d := range rec.all() {
		handled = append(handled, d.Event.ID)
	}
	if fmt.Sprint(handled) != "[bad-call broken good]" {
		t.Fatalf("handler saw %v; the envelope failures must not reach it and the good one must", handled)
	}
	if got := rejected.String(); got != "[bad-call/invalid_id /invalid_json wrong-type/wrong_type broken/permanent]" {
		t.Fatalf("OnReject calls %s", got)
	}

	dl := h.streamMsgs(h.names.DeadLetterStream())
	if len(dl) != 4 {
		t.Fatalf("dead letters: %d, want 4", len(dl))
	}
	wantCodes := []string{"invalid_id", "invalid_json", "wrong_type", "permanent"}
	for i, m := range dl {
		if m.Subject != h.names.DeadLetterSubject("reject") {
			t.Fatalf("dead letter on %s", m.Subject)
		}
		if got := m.Header.Get(bus.HeaderDeadCode); got != wantCodes[i] {
			t.Fatalf("dead letter %d code %s, want %s", i, got, wantCodes[i])
		}
		for hname, want := range map[string]string{
			bus.HeaderOriginalSubject:  subj,
			bus.HeaderConsumer:         "reject",
			bus.HeaderDelivered:        "1",
			bus.HeaderOriginalStream:   testStream(h.names),
			bus.HeaderOriginalSequence: strconv.Itoa(i + 1),
		} {
			if got := m.Header.Get(hname); got != want {
				t.Fatalf("dead letter %d %s = %q, want %q", i, hname, got, want)
			}
		}
		if m.Header.Get(bus.HeaderDeadReason) == "" {
			t.Fatalf("dead letter %d has no reason", i)
		}
	}
	// The original message is kept: headers and body.
	if got := dl[0].Header.Get("ce-id"); got != "bad-call" || string(dl[0].Data) != `{"call_id":"a b"}` {
		t.Fatalf("dead letter 0 lost the original: ce-id %q data %q", got, dl[0].Data)
	}
	if !strings.Contains(dl[0].Header.Get(bus.HeaderDeadReason), "not subject-safe") ||
		dl[0].Header.Get(bus.HeaderOriginalMsgID) != "bad-call" {
		t.Fatalf("dead letter 0 headers %v", dl[0].Header)
	}
	if dl[1].Header.Get("X-Custom") != "kept" || string(dl[1].Data) != "garbage" {
		t.Fatalf("dead letter 1 lost the raw message: %v %q", dl[1].Header, dl[1].Data)
	}
}

func TestConsumeExhaustion(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	var exhausted lines
	spec := h.spec("exhaust")
	spec.MaxDeliver = 3
	spec.OnExhausted = func(ctx context.Context, d bus.Delivery, cause error) error {
		exhausted.addf("%s@%d: %v", d.Event.ID, d.NumDelivered, cause)
		return nil
	}
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		rec.add(d)
		return errors.New("executor unreachable")
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-x", 1))

	natstest.WaitFor(t, waitTimeout, func() bool { return len(h.streamMsgs(h.names.DeadLetterStream())) == 1 }, "the dead letter")
	h.settled(sub)
	if got := rec.String(); got != "[1 2 3]" {
		t.Fatalf("deliveries %s, want [1 2 3]", got)
	}
	if got := exhausted.String(); got != "[op-x@3: executor unreachable]" {
		t.Fatalf("OnExhausted calls %s, want exactly one on the third delivery", got)
	}
	dl := h.streamMsgs(h.names.DeadLetterStream())[0]
	if dl.Header.Get(bus.HeaderDeadCode) != string(bus.CodeExhausted) || dl.Header.Get(bus.HeaderDelivered) != "3" ||
		!strings.Contains(dl.Header.Get(bus.HeaderDeadReason), "executor unreachable") {
		t.Fatalf("dead letter headers %v", dl.Header)
	}
}

func TestConsumeRetryIsNotPoison(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	var exhaustedCalls atomic.Int32
	spec := h.spec("retry")
	spec.MaxDeliver = 2
	spec.OnExhausted = func(context.Context, bus.Delivery, error) error { exhaustedCalls.Add(1); return nil }
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		if rec.add(d) < 5 {
			return bus.Retry(errors.New("batch record not visible yet"), 10*time.Millisecond)
		}
		return nil
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-r", 1))
	natstest.WaitFor(t, waitTimeout, func() bool { return rec.count() == 5 }, "five deliveries")
	h.settled(sub)
	if exhaustedCalls.Load() != 0 || len(h.streamMsgs(h.names.DeadLetterStream())) != 0 {
		t.Fatalf("Retry past MaxDeliver exhausted the message")
	}
}

func TestConsumeHeartbeatPreventsRedelivery(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	spec := h.spec("slow")
	spec.AckWait = time.Second
	spec.Workers = 2 // a redelivered copy would be handled at once, not queued behind the first
	work := 3 * spec.AckWait
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		rec.add(d)
		// The tool body: longer than the ack wait.
		return ctxsleep.Sleep(ctx, work)
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-slow", 1))
	info := h.settled(sub)
	if got := rec.String(); got != "[1]" {
		t.Fatalf("deliveries %s, want [1]: the slow handler's message was redelivered", got)
	}
	// The consumer sequence counts every delivery, redeliveries included.
	if info.Delivered.Consumer != 1 {
		t.Fatalf("server delivered the message %d times", info.Delivered.Consumer)
	}
}

func TestConsumeStopWaitsForInFlightHandler(t *testing.T) {
	h := newHarness(t)
	started := make(chan struct{})
	release := make(chan struct{})
	var handlerCtxErr atomic.Value
	var handlerDone atomic.Bool
	sub := h.consume(h.spec("stop"), func(ctx context.Context, d bus.Delivery) error {
		close(started)
		<-release
		handlerCtxErr.Store(fmt.Sprint(ctx.Err()))
		handlerDone.Store(true)
		return nil
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-s", 1))
	<-started

	type result struct {
		err         error
		handlerDone bool
	}
	stopped := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		err := sub.Stop(ctx)
		stopped <- result{err, handlerDone.Load()}
	}()
	natstest.WaitFor(t, waitTimeout, func() bool {
		return strings.Contains(h.logs.String(), "waiting for in-flight handlers")
	}, "Stop to stop pulling")
	// A bounded look for an event that must not happen: Stop returning early.
	select {
	case r := <-stopped:
		t.Fatalf("Stop returned (%v) while a handler was in flight", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	r := <-stopped
	if r.err != nil || !r.handlerDone {
		t.Fatalf("Stop returned err=%v with the handler done=%v", r.err, r.handlerDone)
	}
	if got := handlerCtxErr.Load(); got != "<nil>" {
		t.Fatalf("handler context was cancelled by a graceful Stop: %v", got)
	}
	info, err := sub.Consumer().Info(h.ctx)
	if err != nil || info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Fatalf("after Stop: %+v %v; the in-flight message must be acknowledged", info, err)
	}
	select {
	case <-sub.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	// Stop is idempotent.
	if err := sub.Stop(h.ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeStopBoundedByContext(t *testing.T) {
	h := newHarness(t)
	started := make(chan struct{})
	release := make(chan struct{})
	sub := h.consume(h.spec("stop-bounded"), func(ctx context.Context, d bus.Delivery) error {
		close(started)
		<-release
		return nil
	})
	defer close(release)
	h.publish(testSubject(h.names, "run-1"), h.event("op-b", 1))
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := sub.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a stuck handler: err = %v, want the deadline", err)
	}
}

func TestConsumePanicIsTransient(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	sub := h.consume(h.spec("panic"), func(ctx context.Context, d bus.Delivery) error {
		if rec.add(d) == 1 {
			panic("nil map somewhere")
		}
		return nil
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-p", 1))
	rec.waitRedelivered(t, "the redelivery after the panic")
	h.settled(sub)
	if !strings.Contains(h.logs.String(), "nil map somewhere") {
		t.Fatal("the panic was not logged")
	}
}

func TestConsumeFaultLeavesMessageUnsettled(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	var faults atomic.Int32
	spec := h.spec("fault")
	spec.AckWait = time.Second
	spec.Fault = func(ctx context.Context, p bus.FaultPoint, d bus.Delivery) error {
		if p == bus.FaultAfterHandlerBeforeAck && d.NumDelivered == 1 {
			faults.Add(1)
			return errors.New("crash before ack")
		}
		return nil
	}
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error { rec.add(d); return nil })
	h.publish(testSubject(h.names, "run-1"), h.event("op-f", 1))
	natstest.WaitFor(t, waitTimeout, func() bool { return rec.count() == 2 }, "redelivery after the ack wait")
	info := h.settled(sub)
	if faults.Load() != 1 || rec.String() != "[1 2]" || info.NumAckPending != 0 {
		t.Fatalf("faults %d deliveries %s ack pending %d; want 1, [1 2], 0", faults.Load(), rec.String(), info.NumAckPending)
	}
}

func TestConsumeDeadLetterFailureKeepsMessage(t *testing.T) {
	h := newHarness(t)
	// Without a dead-letter stream the copy cannot be stored: the message must not be
	// terminated, only returned, until the copy succeeds.
	if err := h.js.DeleteStream(h.ctx, h.names.DeadLetterStream()); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	spec := h.spec("dl-fail")
	spec.SettleTimeout = 500 * time.Millisecond
	spec.BackOff = []time.Duration{50 * time.Millisecond}
	spec.MaxDeliver = -1
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		rec.add(d)
		return contracts.Reject(contracts.RejectInvalidField, "bad")
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-dl", 1))
	natstest.WaitFor(t, waitTimeout, func() bool { return rec.count() >= 2 }, "a redelivery while the dead letter cannot be stored")

	if err := bus.EnsureTopology(h.ctx, h.js, h.names, bus.TopologyConfig{}); err != nil {
		t.Fatal(err)
	}
	h.settled(sub)
	dl := h.streamMsgs(h.names.DeadLetterStream())
	if len(dl) != 1 || dl[0].Header.Get("ce-id") != "op-dl" {
		t.Fatalf("dead letters %d", len(dl))
	}
}

func TestConsumeWorkersRunConcurrently(t *testing.T) {
	h := newHarness(t)
	const workers = 3
	spec := h.spec("pool")
	spec.Workers = workers
	var running, peak atomic.Int32
	gate := make(chan struct{})
	var rec recorder
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		rec.add(d)
		<-gate
		return nil
	})
	for i := range 2 * workers {
		h.publish(testSubject(h.names, "run-1"), h.event(fmt.Sprintf("op-%d", i), i))
	}
	natstest.WaitFor(t, waitTimeout, func() bool { return running.Load() == workers }, "every worker busy")
	// While every worker is busy, at most one more message is held (heartbeated) by the
	// process; the rest stay on the server for other instances.
	natstest.WaitFor(t, waitTimeout, func() bool {
		info, err := sub.Consumer().Info(h.ctx)
		return err == nil && info.NumAckPending <= workers+1 && info.NumPending >= uint64(2*workers-(workers+1))
	}, "in-flight capped at workers+1")
	close(gate)
	h.settled(sub)
	if peak.Load() != workers || rec.count() != 2*workers {
		t.Fatalf("peak concurrency %d handled %d; want %d and %d", peak.Load(), rec.count(), workers, 2*workers)
	}
}

func TestConsumeHardStopCancelsHandlersAndReturnsMessage(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(h.ctx)
	started := make(chan struct{})
	var sawCancel atomic.Bool
	sub, err := bus.Consume(ctx, h.js, h.spec("hard"), func(ctx context.Context, d bus.Delivery) error {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return ctx.Err()
	}, h.log)
	if err != nil {
		t.Fatal(err)
	}
	h.publish(testSubject(h.names, "run-1"), h.event("op-h", 1))
	<-started
	cancel()
	select {
	case <-sub.Done():
	case <-time.After(waitTimeout):
		t.Fatal("hard stop did not end the loop")
	}
	if !sawCancel.Load() {
		t.Fatal("handler context not cancelled by the hard stop")
	}
	// The interrupted message is returned, not dead-lettered, and a new instance gets it.
	var rec recorder
	sub2 := h.consume(h.spec("hard"), func(ctx context.Context, d bus.Delivery) error { rec.add(d); return nil })
	h.settled(sub2)
	if rec.count() != 1 || len(h.streamMsgs(h.names.DeadLetterStream())) != 0 {
		t.Fatalf("after restart handled %d, dead letters %d", rec.count(), len(h.streamMsgs(h.names.DeadLetterStream())))
	}
}

func TestEnsureConsumerConfig(t *testing.T) {
	h := newHarness(t)
	spec := h.spec("cfg")
	spec.FilterSubjects = []string{testSubject(h.names, "a"), testSubject(h.names, "b")}
	spec.MaxAckPending = 7
	cons, err := bus.EnsureConsumer(h.ctx, h.js, "", spec)
	if err != nil {
		t.Fatal(err)
	}
	c := cons.CachedInfo().Config
	if c.Durable != "cfg" || c.AckPolicy != jetstream.AckExplicitPolicy || c.AckWait != 2*time.Second ||
		c.MaxDeliver != -1 || c.MaxAckPending != 7 || len(c.FilterSubjects) != 2 || len(c.BackOff) != 0 {
		t.Fatalf("consumer config %+v", c)
	}
	// Idempotent, and updates apply.
	spec.AckWait = 3 * time.Second
	cons, err = bus.EnsureConsumer(h.ctx, h.js, testStream(h.names), spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.AckWait; got != 3*time.Second {
		t.Fatalf("ack wait after update %s", got)
	}
	if _, err := bus.EnsureConsumer(h.ctx, h.js, "", bus.ConsumerSpec{Durable: "x"}); err == nil {
		t.Fatal("a consumer without a stream was accepted")
	}
}

func TestConsumeEndsWhenConsumerIsDeleted(t *testing.T) {
	tests := []struct {
		name string
		// waiting: delete while a pull request waits on the server (it is answered with
		// "consumer deleted"); otherwise while the only message is being handled, so no
		// pull is waiting and the loss shows only as missed pull heartbeats.
		waiting bool
	}{
		{"while a pull waits", true},
		{"while no pull waits", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			spec := h.spec("doomed")
			spec.PullExpiry = time.Second
			inHandler := make(chan struct{})
			release := make(chan struct{})
			sub := h.consume(spec, func(context.Context, bus.Delivery) error {
				close(inHandler)
				<-release
				return nil
			})
			if tc.waiting {
				natstest.WaitFor(t, waitTimeout, func() bool {
					info, err := sub.Consumer().Info(h.ctx)
					return err == nil && info.NumWaiting > 0
				}, "a waiting pull request")
			} else {
				h.publish(testSubject(h.names, "run-1"), h.event("op-d", 1))
				<-inHandler
			}
			if err := h.js.DeleteConsumer(h.ctx, testStream(h.names), "doomed"); err != nil {
				t.Fatal(err)
			}
			if !tc.waiting {
				close(release)
			}
			natstest.WaitFor(t, waitTimeout, func() bool {
				select {
				case <-sub.Done():
					return true
				default:
					return false
				}
			}, "Done after the consumer was deleted")
		})
	}
}

func TestConsumeHeartbeatCoversSlowHooks(t *testing.T) {
	h := newHarness(t)
	spec := h.spec("slow-hook")
	spec.AckWait = time.Second
	spec.Workers = 2
	var hookCalls atomic.Int32
	spec.OnReject = func(ctx context.Context, d bus.Delivery, rej *contracts.Rejection) error {
		hookCalls.Add(1)
		// Publishing the rejection event takes longer than the ack wait.
		t := time.NewTimer(3 * spec.AckWait)
		defer t.Stop()
		<-t.C
		return nil
	}
	sub := h.consume(spec, func(context.Context, bus.Delivery) error {
		return contracts.Reject(contracts.RejectInvalidField, "bad")
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-hook", 1))
	info := h.settled(sub)
	if hookCalls.Load() != 1 || info.Delivered.Consumer != 1 {
		t.Fatalf("hook calls %d, deliveries %d; want 1 and 1", hookCalls.Load(), info.Delivered.Consumer)
	}
}

// A handler stuck in a call that never returns (a JetStream reply lost in a leader change)
// must not hold its message forever behind its heartbeat: HandlerTimeout cancels it and the
// message is delivered again.
func TestConsumeHandlerTimeoutRedeliversAStuckHandler(t *testing.T) {
	h := newHarness(t)
	var rec recorder
	spec := h.spec("stuck")
	spec.HandlerTimeout = 200 * time.Millisecond
	sub := h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		if rec.add(d) == 1 {
			<-ctx.Done() // the call that never returns, unless its context ends
			return ctx.Err()
		}
		return nil
	})
	h.publish(testSubject(h.names, "run-1"), h.event("op-stuck", 1))
	h.settled(sub)
	rec.waitRedelivered(t, "a second delivery after the handler timed out")
}
