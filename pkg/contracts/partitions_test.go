package contracts_test

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPartitionOneKeepsTheNames pins the names of a deployment with one partition: they
// are those every earlier version used, whatever the partition count field says (0 or 1).
func TestPartitionOneKeepsTheNames(t *testing.T) {
	for _, p := range []int{0, 1} {
		n := contracts.NewNames("")
		n.Partitions = p
		got := map[string]string{
			"results stream": n.ResultsStream(), "audit stream": n.AuditStream(),
			"calls": n.CallsBucket(), "runs": n.RunsBucket(), "batches": n.BatchesBucket(),
			"results subject": n.ResultsSubject("run-7"), "corrections": n.ResultCorrectionsSubject("run-7"),
			"audit subject": n.AuditSubject("run-7"), "reconcile": n.ReconcileAuditSubject("run-7"),
			"checkpoint": n.AuditCheckpointSubject(), "audit prefix": n.AuditPrefix(),
			"run record": n.RunRecordSubject("run-7"), "call record": n.CallRecordSubject("brain.run-7.0.c1"),
			"results wildcard": n.ResultsWildcard(), "calls stream": n.CallRecordsStream(),
			"runs filter": n.RunRecordsFilter(), "target filter": n.TargetCallRecordsFilter("brain"),
		}
		want := map[string]string{
			"results stream": "AWAKEN_RESULTS", "audit stream": "AWAKEN_AUDIT",
			"calls": "AWAKEN_calls", "runs": "AWAKEN_runs", "batches": "AWAKEN_batches",
			"results subject": "awaken.results.run-7", "corrections": "awaken.corrections.run-7",
			"audit subject": "awaken.audit.run-7", "reconcile": "awaken.audit.reconcile.run-7",
			"checkpoint": "awaken.audit.checkpoint.heads", "audit prefix": "awaken.audit.",
			"run record": "$KV.AWAKEN_runs.run-7", "call record": "$KV.AWAKEN_calls.brain.run-7.0.c1",
			"results wildcard": "awaken.results.>", "calls stream": "KV_AWAKEN_calls",
			"runs filter": "$KV.AWAKEN_runs.>", "target filter": "$KV.AWAKEN_calls.brain.>",
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("P=%d %s = %q, want %q", p, k, got[k], w)
			}
		}
		if n.PartitionOf("run-7") != 0 {
			t.Errorf("P=%d: run-7 in partition %d", p, n.PartitionOf("run-7"))
		}
	}
}

// TestPartitionOfIsFNV1aModP: the documented hash (docs/protocol.md), so another
// implementation finds a run's partition.
func TestPartitionOfIsFNV1aModP(t *testing.T) {
	n := contracts.NewNames("")
	n.Partitions = 4
	seen := map[int]bool{}
	for i := range 200 {
		run := fmt.Sprintf("run-%d", i)
		h := fnv.New32a()
		h.Write([]byte(run))
		want := int(h.Sum32() % 4)
		if got := n.PartitionOf(run); got != want {
			t.Fatalf("PartitionOf(%s) = %d, want %d", run, got, want)
		}
		seen[want] = true
	}
	if len(seen) != 4 {
		t.Fatalf("200 runs fell in %d of 4 partitions", len(seen))
	}
}

// TestPartitionNamesDoNotOverlap: partition k ≥ 1 has stores and subjects of its own, and
// a run's subjects are those of its partition.
func TestPartitionNamesDoNotOverlap(t *testing.T) {
	n := contracts.NewNames("")
	n.Partitions = 3
	p2 := n.Partition(2)
	for got, want := range map[string]string{
		p2.ResultsStream(): "AWAKEN_RESULTS_P2", p2.AuditStream(): "AWAKEN_AUDIT_P2",
		p2.CallsBucket(): "AWAKEN_calls_p2", p2.RunsBucket(): "AWAKEN_runs_p2", p2.BatchesBucket(): "AWAKEN_batches_p2",
		p2.ResultsWildcard(): "awaken.p2.results.>", p2.AuditWildcard(): "awaken.p2.audit.>",
		p2.AuditCheckpointSubject(): "awaken.p2.audit.checkpoint.heads",
	} {
		if got != want {
			t.Errorf("partition 2: %q, want %q", got, want)
		}
	}
	for i := range 50 {
		run := fmt.Sprintf("r%d", i)
		pn := n.Of(run)
		if !strings.HasPrefix(n.ResultsSubject(run), strings.TrimSuffix(pn.ResultsWildcard(), ">")) ||
			!strings.HasPrefix(n.AuditSubject(run), pn.AuditPrefix()) ||
			n.RunRecordSubject(run) != contracts.RecordSubject(pn.RunsBucket(), run) ||
			n.CallRecordSubject(contracts.CallKey("brain", run, 1, "c")) != contracts.RecordSubject(pn.CallsBucket(), contracts.CallKey("brain", run, 1, "c")) {
			t.Fatalf("run %s (partition %d): subjects outside its partition", run, pn.PartitionIndex())
		}
		key, k, ok := n.RecordKeyOf(contracts.Names.CallsBucket, n.CallRecordSubject(contracts.CallKey("brain", run, 1, "c")))
		if !ok || k != pn.PartitionIndex() || key != contracts.CallKey("brain", run, 1, "c") {
			t.Fatalf("RecordKeyOf: %q %d %v", key, k, ok)
		}
	}
	if got, err := contracts.PartitionsOf(nil); err != nil || got != 1 {
		t.Fatalf("PartitionsOf(no metadata) = %d, %v; want 1", got, err)
	}
}
