package checker

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// world is a hand-made history and snapshot that the tests corrupt one promise at a time.
type world struct {
	h   History
	o   Observed
	seq uint64
	now time.Time
}

func newWorld() *world {
	return &world{o: Observed{Ledger: map[string]LedgerEntry{}}, now: t0}
}

func (w *world) tick() time.Time { w.now = w.now.Add(time.Millisecond); return w.now }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (w *world) results(typ string, v any) {
	w.seq++
	w.o.Results = append(w.o.Results, Message{Seq: w.seq, Time: w.tick(), Subject: "awaken.results.x", Type: typ, Data: mustJSON(v)})
}

// submit records a submitted batch of (call id, tool id) pairs.
func (w *world) submit(run string, tools ...string) *Batch {
	sub := contracts.BatchSubmission{RunID: run, Step: 1}
	for i, tool := range tools {
		sub.Calls = append(sub.Calls, contracts.ToolCall{CallID: "c" + string(rune('0'+i)), ToolID: tool})
	}
	w.h.Batches = append(w.h.Batches, Batch{Submission: sub, SubmittedAt: w.tick(), Expect: map[string]Expectation{}})
	return &w.h.Batches[len(w.h.Batches)-1]
}

// run records one body start of a call.
func (w *world) run(b *Batch, i int) {
	sub := b.Submission
	key := contracts.OperationKey(sub.RunID, sub.Step, sub.Calls[i].CallID)
	e := w.o.Ledger[key]
	e.Count++
	e.At = w.tick()
	w.o.Ledger[key] = e
}

// publish publishes a batch as an atomic batch of per-call events with the given outcomes
// (default completed).
func (w *world) publish(b *Batch, indeterminate map[int]string) {
	evs, fin := resultsOf(b, indeterminate)
	for _, ev := range evs {
		w.results(contracts.TypeToolResult, ev)
	}
	w.results(contracts.TypeBatchFinalized, fin)
}

// publishOne publishes a batch as one results message, the publisher's usual form.
func (w *world) publishOne(b *Batch, indeterminate map[int]string) {
	evs, fin := resultsOf(b, indeterminate)
	w.results(contracts.TypeBatchResults, contracts.BatchResults{BatchID: fin.BatchID, RunID: fin.RunID, Results: evs, Finalized: fin})
}

func resultsOf(b *Batch, indeterminate map[int]string) ([]contracts.ToolResultEvent, contracts.BatchFinalized) {
	sub := b.Submission
	var evs []contracts.ToolResultEvent
	for i, c := range sub.Calls {
		ev := contracts.ToolResultEvent{BatchID: sub.BatchID(), RunID: sub.RunID, Index: i, CallID: c.CallID, ToolID: c.ToolID,
			Outcome: contracts.OutcomeCompleted, Output: contracts.TextOutput(c.CallID, "ok")}
		if reason, ok := indeterminate[i]; ok {
			ev.Outcome, ev.Output = contracts.OutcomeIndeterminate, contracts.ErrorOutput(c.CallID, indeterminatePrefix+reason)
		}
		evs = append(evs, ev)
	}
	return evs, contracts.BatchFinalized{BatchID: sub.BatchID(), RunID: sub.RunID, Step: sub.Step}
}

// approve records an approval of call i in the audit and tickets streams.
func (w *world) approve(b *Batch, i int, auditOnly bool) {
	sub := b.Submission
	c := sub.Calls[i]
	w.seq++
	w.o.Audit = append(w.o.Audit, Message{Seq: w.seq, Time: w.tick(), Type: contracts.TypeAudit, Data: mustJSON(contracts.AuditRecord{
		RunID: sub.RunID, BatchID: sub.BatchID(), ToolID: c.ToolID, CallID: c.CallID, Decision: "approved"})})
	if auditOnly {
		return
	}
	w.seq++
	w.o.Tickets = append(w.o.Tickets, Message{Seq: w.seq, Time: w.tick(), Type: contracts.TypeTicketResolved, Data: mustJSON(contracts.TicketResolution{
		CorrelationID: contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, c.CallID), Code: "approved"})})
}

func rules() Rules {
	return Rules{NeverReplay: func(tool string) bool { return tool == "counter" || tool == "ask_me" }}
}

// good builds a healthy history: a sequential batch (published as one results message),
// an approved call, a denied call and an Indeterminate outcome explained by a kill.
func good() *world {
	w := newWorld()
	a := w.submit("run-a", "echo", "counter")
	w.run(a, 0)
	w.run(a, 1)
	w.publishOne(a, nil)
	b := w.submit("run-b", "ask_me", "forbidden")
	b.Expect["c0"], b.Expect["c1"] = ExpectApproval, ExpectDenied
	w.approve(b, 0, false)
	w.run(b, 0)
	w.publish(b, nil)
	c := w.submit("run-c", "counter", "echo")
	w.run(c, 0)
	w.h.Kills = append(w.h.Kills, Kill{Target: "brain-exec", At: w.tick()})
	w.run(c, 1)
	w.publish(c, map[int]string{0: execcore.ReasonOwnerLeaseExpired})
	return w
}

func TestCheck_healthyHistoryHasNoViolation(t *testing.T) {
	w := good()
	r := Check(w.h, &w.o, rules())
	if !r.OK() {
		t.Fatalf("violations in a healthy history: %v", r.Violations)
	}
	if r.Batches != 3 || r.Calls != 6 || r.Kills != 1 || r.Indeterminate != 1 || r.Duplicates != 0 || r.Lost != 0 {
		t.Errorf("summary %s", r.Summary())
	}
}

// bodyAfterPublication corrupts a world with a two-call batch of run whose second body
// starts after publish (one of the two publication forms) published the batch.
func bodyAfterPublication(run string, publish func(w *world, b *Batch, indeterminate map[int]string)) func(*world) {
	return func(w *world) {
		b := w.submit(run, "echo", "echo")
		w.run(b, 0)
		publish(w, b, nil)
		w.run(b, 1)
	}
}

func TestCheck_catchesEveryViolationKind(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(w *world)
		want    Kind
	}{
		{"batch never published", func(w *world) { w.submit("run-lost", "echo") }, KindLost},
		{"batch published twice", func(w *world) { w.publish(&w.h.Batches[1], nil) }, KindDuplicate},
		{"results message published twice", func(w *world) { w.publishOne(&w.h.Batches[0], nil) }, KindDuplicate},
		{"results message and atomic batch of one batch", func(w *world) { w.publish(&w.h.Batches[0], nil) }, KindDuplicate},
		{"results message out of model order", func(w *world) {
			b := w.submit("run-order-one", "echo", "wc")
			evs, fin := resultsOf(b, nil)
			evs[0], evs[1] = evs[1], evs[0]
			w.results(contracts.TypeBatchResults, contracts.BatchResults{BatchID: fin.BatchID, RunID: fin.RunID, Results: evs, Finalized: fin})
		}, KindOrder},
		{"results message missing a result", func(w *world) {
			b := w.submit("run-short-one", "echo", "echo")
			evs, fin := resultsOf(b, nil)
			w.results(contracts.TypeBatchResults, contracts.BatchResults{BatchID: fin.BatchID, RunID: fin.RunID, Results: evs[:1], Finalized: fin})
		}, KindOrder},
		{"a body started after its results message", bodyAfterPublication("run-late-one", (*world).publishOne), KindNotAtomic},
		{"undecodable results message", func(w *world) {
			w.seq++
			w.o.Results = append(w.o.Results, Message{Seq: w.seq, Type: contracts.TypeBatchResults, Data: []byte("{")})
		}, KindMalformed},
		{"published but never submitted", func(w *world) {
			b := w.submit("run-ghost", "echo")
			w.publish(b, nil)
			w.h.Batches = w.h.Batches[:len(w.h.Batches)-1]
		}, KindDuplicate},
		{"results out of model order", func(w *world) {
			b := w.submit("run-order", "echo", "echo")
			w.publish(b, nil)
			n := len(w.o.Results)
			w.o.Results[n-3].Data, w.o.Results[n-2].Data = w.o.Results[n-2].Data, w.o.Results[n-3].Data
		}, KindOrder},
		{"a result missing", func(w *world) {
			b := w.submit("run-short", "echo", "echo")
			w.publish(b, nil)
			n := len(w.o.Results)
			w.o.Results = slices.Delete(w.o.Results, n-2, n-1)
		}, KindOrder},
		{"another batch's message inside a publication", func(w *world) {
			b := w.submit("run-split", "echo", "echo")
			w.publish(b, nil)
			n := len(w.o.Results)
			other := w.o.Results[0]
			other.Seq = 1000
			w.o.Results = slices.Insert(w.o.Results, n-1, other)
		}, KindNotAtomic},
		{"a body started after its batch was published", bodyAfterPublication("run-late", (*world).publish), KindNotAtomic},
		{"never_replay body ran twice", func(w *world) { w.run(&w.h.Batches[0], 1) }, KindReplayed},
		{"indeterminate with no kill in its window", func(w *world) {
			b := w.submit("run-unexplained", "counter")
			w.run(b, 0)
			w.publish(b, map[int]string{0: execcore.ReasonOwnerLeaseExpired})
		}, KindUnexplained},
		{"indeterminate with a fault that ended before its submission", func(w *world) {
			start := w.tick()
			w.h.Kills = append(w.h.Kills, Kill{Target: "leader-stop nats-1", At: start, Until: w.tick()})
			b := w.submit("run-after-fault", "counter")
			w.run(b, 0)
			w.publish(b, map[int]string{0: execcore.ReasonOwnerLeaseExpired})
		}, KindUnexplained},
		{"indeterminate with an unknown reason", func(w *world) {
			b := w.submit("run-odd", "counter")
			w.h.Kills = append(w.h.Kills, Kill{Target: "gate", At: w.tick()})
			w.publish(b, map[int]string{0: "the dog ate it"})
		}, KindUnexplained},
		{"cancelled but never cancelled", func(w *world) {
			b := w.submit("run-cancel", "counter")
			w.publish(b, map[int]string{0: "cancelled"})
		}, KindUnexplained},
		{"denied call ran", func(w *world) { w.run(&w.h.Batches[1], 1) }, KindUnauthorized},
		{"approval-needing call ran without approval", func(w *world) {
			b := w.submit("run-noapproval", "ask_me")
			b.Expect["c0"] = ExpectApproval
			w.run(b, 0)
			w.publish(b, nil)
		}, KindUnauthorized},
		{"approval-needing call ran before its approval", func(w *world) {
			b := w.submit("run-early", "ask_me")
			b.Expect["c0"] = ExpectApproval
			w.run(b, 0)
			w.approve(b, 0, false)
			w.publish(b, nil)
		}, KindUnauthorized},
		{"approval only in the audit, never resolved", func(w *world) {
			b := w.submit("run-auditonly", "ask_me")
			b.Expect["c0"] = ExpectApproval
			w.approve(b, 0, true)
			w.run(b, 0)
			w.publish(b, nil)
		}, KindUnauthorized},
		{"rejected batch published", func(w *world) {
			b := w.submit("run-rejected", "echo")
			b.Rejected = true
			w.publish(b, nil)
		}, KindRejectedPublished},
		{"undecodable result", func(w *world) {
			w.seq++
			w.o.Results = append(w.o.Results, Message{Seq: w.seq, Type: contracts.TypeToolResult, Data: []byte("{")})
		}, KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := good()
			tt.corrupt(w)
			r := Check(w.h, &w.o, rules())
			if !r.Has(tt.want) {
				t.Fatalf("want a %s violation, got %v (%s)", tt.want, r.Violations, r.Summary())
			}
		})
	}
}

func TestCheck_explainedIndeterminateReasons(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		want   bool
	}{
		{"owner lease", execcore.ReasonOwnerLeaseExpired, true},
		{"attempt budget", execcore.ReasonAttemptsExhausted, true},
		{"executor exhausted", "brain-exec gave up after 10 deliveries: boom", true},
		{"gate exhausted", "gate: the gate request failed on every delivery", true},
		{"anything else", "timed out", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := explainedReason(tt.reason); got != tt.want {
				t.Errorf("explainedReason(%q) = %v", tt.reason, got)
			}
		})
	}
}

func TestReport_summary(t *testing.T) {
	r := Report{Batches: 2, Calls: 5, Kills: 3, Indeterminate: 1, Violations: []Violation{{Kind: KindLost}}}
	want := "checker: batches=2 calls=5 kills=3 indeterminate=1 duplicates=0 lost=0 violations=1"
	if got := r.Summary(); got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

// TestCheck_aFaultSpanningTheBatchExplainsIt: a node stopped before a batch was submitted
// and back only after it was published disturbed the batch all along, though neither the
// kill nor the heal falls between its submission and its publication.
func TestCheck_aFaultSpanningTheBatchExplainsIt(t *testing.T) {
	w := good()
	start := w.tick()
	b := w.submit("run-during-fault", "counter")
	w.run(b, 0)
	w.publish(b, map[int]string{0: execcore.ReasonOwnerLeaseExpired})
	w.h.Kills = append(w.h.Kills, Kill{Target: "leader-stop nats-1", At: start, Until: w.tick()})
	if r := Check(w.h, &w.o, rules()); !r.OK() {
		t.Fatalf("violations: %v", r.Violations)
	}
}
