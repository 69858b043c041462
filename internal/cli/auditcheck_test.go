package cli

import (
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestUnauditedDecisionsNamesEachMissingRecord: of a run's call records, a decision and a
// ticket's resolution whose audit records the chain lacks are named; a call with both, a
// call not decided yet and a parked call not resolved yet are not.
func TestUnauditedDecisionsNamesEachMissingRecord(t *testing.T) {
	batch := contracts.BatchID("run-x", 1)
	var recs []auditchain.Record
	audit := func(callID, decision string) {
		ev, err := cloudevent.NewEvent(callID+":"+decision, "awaken/gate", contracts.TypeAudit,
			contracts.AuditRecord{RunID: "run-x", BatchID: batch, CallID: callID, Decision: decision})
		if err != nil {
			t.Fatal(err)
		}
		m := cloudevent.EncodeMsg("awaken.audit.run-x", ev)
		recs = append(recs, auditchain.Record{Seq: uint64(len(recs) + 1), Subject: m.Subject, Header: m.Header, Data: m.Data})
	}
	decided := func(callID string, kind contracts.GateOutcomeKind, resolvedBy string) runCall {
		return runCall{batchID: batch, rec: contracts.CallRecord{CallID: callID, Decision: &contracts.GateOutcome{Kind: kind}, ResolvedActor: resolvedBy}}
	}
	audit("c1", contracts.AuditDecisionAllow)
	audit("c2", contracts.AuditDecisionAsk)
	audit("c2", contracts.AuditDecisionApproved)
	audit("c4", contracts.AuditDecisionAsk)
	calls := []runCall{
		decided("c1", contracts.GateAllow, ""),
		decided("c2", contracts.GateRequireConfirmation, "alice"),
		decided("c3", contracts.GateBlock, ""),
		decided("c4", contracts.GateRequireConfirmation, "bob"),
		decided("c5", contracts.GateRequireConfirmation, ""),
		{batchID: batch, rec: contracts.CallRecord{CallID: "c6"}},
	}
	missing, err := unauditedDecisions(recs, calls)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"decision ask of call c5 has no audit record (batch " + batch + ")",
		"decision deny of call c3 has no audit record (batch " + batch + ")",
		"resolution by bob of call c4 has no audit record (batch " + batch + ")",
	}
	if strings.Join(missing, "\n") != strings.Join(want, "\n") {
		t.Fatalf("named\n%s\nwant\n%s", strings.Join(missing, "\n"), strings.Join(want, "\n"))
	}
}
