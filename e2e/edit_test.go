package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// audits reads every audit record of run from the audit stream.
func (h *harness) audits(run string) []contracts.AuditRecord {
	h.tb.Helper()
	names := h.cfg.Names()
	return auditsOn[contracts.AuditRecord](h.tb, h.srv, names, names.AuditSubject(run), contracts.TypeAudit)
}

// auditsOn reads every record on subject of srv's audit stream, oldest first, each a
// CloudEvent of type typ whose data is a T.
func auditsOn[T any](tb testing.TB, srv *natstest.Server, names contracts.Names, subject, typ string) []T {
	tb.Helper()
	_, js := srv.Conn(tb)
	var out []T
	for _, m := range servicetest.ReadStored(tb, servicetest.Context(tb, 30*time.Second), js, names.AuditStream(), subject, true) {
		if m.Event.Type != typ {
			tb.Errorf("audit %d on %s has type %q, want %q", m.Seq, subject, m.Event.Type, typ)
		}
		out = append(out, servicetest.Decode[T](tb, m.Event))
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
