package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// audits reads every audit record of run from the audit stream.
func (h *harness) audits(run string) []contracts.AuditRecord {
	h.tb.Helper()
	_, js := h.srv.Conn(h.tb)
	ctx := ctxFor(h.tb, 10*time.Second)
	names := h.cfg.Names()
	c, err := js.OrderedConsumer(ctx, names.AuditStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.AuditSubject(run)}})
	if err != nil {
		h.tb.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		h.tb.Fatal(err)
	}
	var out []contracts.AuditRecord
	for pending := int(info.NumPending); len(out) < pending; {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			h.tb.Fatal(err)
		}
		var a contracts.AuditRecord // binary CloudEvents: the body is the payload
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			h.tb.Fatalf("audit %s: %v", m.Data(), err)
		}
		out = append(out, a)
	}
	return out
}

// TestApproval_editedArgumentsRunOnceThroughACrash approves the parked ask_me with edited
// arguments while the gate fails right after committing the resolution (before publishing
// anything): the redelivered resume command finishes what was committed, so the call runs
// once, the record keeps the edit and its actor, and the audit records the approval once,
// with both arguments.
func TestApproval_editedArgumentsRunOnceThroughACrash(t *testing.T) {
	h := newHarness(t)
	const run = "run-edit-crash"
	ticket := h.parkedAt(run)
	op := contracts.OperationID(run, 1, "c2")
	var once sync.Once
	var fired atomic.Bool
	h.setFaults(func(_ context.Context, service string, p pipeline.FaultPoint, fop string) error {
		var err error
		if service == "gate" && p == pipeline.FaultAfterCommit && fop == op {
			once.Do(func() {
				fired.Store(true)
				err = fmt.Errorf("injected crash after committing the resolution of %s", op)
			})
		}
		return err
	})
	ctx := ctxFor(t, 60*time.Second)
	const edited = `{"why":"edited by a human"}`
	res, err := h.client.Decide(ctx, ticket, contracts.PermissionDecision{Decision: contracts.DecisionAllow, Arguments: json.RawMessage(edited)}, "erin")
	if err != nil || res.Code != "approved" || res.Actor != "erin" {
		t.Fatalf("approve with edits: %+v %v", res, err)
	}
	h.wantResults(ctx, run, "before|ran ask_me|1")
	if !fired.Load() {
		t.Fatal("the crash after the resolution's commit was never injected")
	}
	if n := h.ledger(run, 1, "c2"); n != 1 {
		t.Errorf("the edited call ran %d times, want once", n)
	}
	rec, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, "c2"))
	if err != nil || string(rec.EditedArguments) != edited || rec.ResolvedActor != "erin" {
		t.Fatalf("call record keeps %s by %q (%v), want the edit by erin", rec.EditedArguments, rec.ResolvedActor, err)
	}
	approved := 0
	for _, a := range h.audits(run) {
		if a.CallID != "c2" || a.Decision != contracts.AuditDecisionApproved {
			continue
		}
		approved++
		if a.Actor != "erin" || string(a.Arguments) != edited || string(a.ProposedArguments) != `{"why":"a human decides"}` {
			t.Errorf("approved audit %+v, want erin's edit with both arguments", a)
		}
	}
	if approved != 1 {
		t.Errorf("%d approved audit records, want 1", approved)
	}
}
