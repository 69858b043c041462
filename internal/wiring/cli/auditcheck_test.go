package cli

import (
	"strings"
	"testing"
	"time"

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
	missing, _, err := unauditedDecisions(recs, calls, 1, time.Time{})
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

// TestUnauditedDecisionsOfAPrunedChain: when a run's chain starts at n 3 (its first two
// records pruned), a decision its call record dates before the first remaining record is
// taken as pruned with them, at most two such; a third, and one dated after, are named.
func TestUnauditedDecisionsOfAPrunedChain(t *testing.T) {
	batch := contracts.BatchID("run-x", 1)
	first := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	decidedAt := func(callID string, at time.Time) runCall {
		return runCall{batchID: batch, rec: contracts.CallRecord{CallID: callID, Decision: &contracts.GateOutcome{Kind: contracts.GateAllow},
			Timeline: []contracts.TimelineMark{{Stage: contracts.StageDecided, At: at}}}}
	}
	calls := []runCall{
		decidedAt("c1", first.Add(-3*time.Second)),
		decidedAt("c2", first.Add(-2*time.Second)),
		decidedAt("c3", first.Add(-time.Second)),
		decidedAt("c4", first.Add(time.Second)),
	}
	missing, pruned, err := unauditedDecisions(nil, calls, 3, first)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"decision allow of call c3 has no audit record (batch " + batch + ")",
		"decision allow of call c4 has no audit record (batch " + batch + ")",
	}
	if pruned != 2 || strings.Join(missing, "\n") != strings.Join(want, "\n") {
		t.Fatalf("pruned %d, named\n%s\nwant 2 and\n%s", pruned, strings.Join(missing, "\n"), strings.Join(want, "\n"))
	}
}
