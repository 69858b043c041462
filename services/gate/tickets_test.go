package gate

import (
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestTicketOutlivesAStaleReadOfItsCall: the gate commits a call Awaiting, then creates its
// ticket and reads the call again to catch a resume that raced the create. A read answered
// by a replica of the calls bucket behind the Awaiting write shows the call Requested (or
// missing); that is not a call that moved on, and deleting the ticket then left the call
// Awaiting with no ticket anyone could resume (make chaos-cluster). The stale view is the
// bucket holding the call Requested while the gate builds the ticket of its Awaiting
// record.
func TestTicketOutlivesAStaleReadOfItsCall(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	svc := h.StartReplica(bus.WithWorkers(1))
	sub := h.submission(1, contracts.ToolCall{CallID: "c0", ToolID: "ask_me"})
	b := h.store(sub)
	stale := newCallRecord(b, 0)
	if _, err := h.Env.Calls.Create(h.Ctx, callKey(b, 0), stale); err != nil {
		t.Fatal(err)
	}
	corr := contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, "c0")
	awaiting := stale
	awaiting.Phase = contracts.AwaitingPhase(contracts.WaitToolPermission, corr)
	tk, err := svc.tickets.TicketFor(b, 0, &awaiting)
	if err != nil {
		t.Fatal(err)
	}
	live, err := svc.tickets.EnsureTicket(h.Ctx, b, 0, tk)
	if err != nil {
		t.Fatal(err)
	}
	if !live {
		t.Error("ensureTicket reports the ticket dead after a stale read of its call")
	}
	if _, ok := h.ticket(corr); !ok {
		t.Error("the ticket was deleted after a stale read of its call")
	}
}
