package e2e_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/readmodel"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// subjectCount is how many messages stream holds on subject (a filter).
func (h *harness) subjectCount(stream, subject string) uint64 {
	h.tb.Helper()
	_, js := h.srv.Conn(h.tb)
	ctx := ctxFor(h.tb, 10*time.Second)
	st, err := js.Stream(ctx, stream)
	if err != nil {
		h.tb.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		h.tb.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// TestPartitions_runsSpreadOverEveryPartitionAndStayInTheirs: at P=4, many runs of two
// sequential steps run at once. Every run falls in the partition its id hashes to, and
// every partition gets runs; each batch's results are published once and in model order,
// on the run's partition's results stream; the run's call and run records and its audit
// records are in its partition's stores and in no other's; and the run retention sweeps
// every partition: once expired, no record of any run is left in any bucket.
func TestPartitions_runsSpreadOverEveryPartitionAndStayInTheirs(t *testing.T) {
	cfg := exampleConfig(t)
	cfg.Storage.Partitions = 4
	cfg.Retention = config.Retention{Runs: (8 * time.Second).String()}
	h := newHarness(t, withConfig(cfg))
	n := h.cfg.Names()
	if got := h.stack.Env.Names.PartitionCount(); got != 4 {
		t.Fatalf("services run with %d partitions, want 4", got)
	}

	const runs = 24
	ids := make([]string, runs)
	used := map[int]bool{}
	for i := range ids {
		ids[i] = fmt.Sprintf("part-run-%02d", i)
		used[n.PartitionOf(ids[i])] = true
	}
	if len(used) != 4 {
		t.Fatalf("the runs fall in %d of 4 partitions; pick other ids", len(used))
	}

	// The reader of the api and the CLI, and the harness's client, are not told P: they
	// read it from the deployment.
	_, js := h.srv.Conn(t)
	reader, err := readmodel.OpenReader(ctxFor(t, 10*time.Second), js, contracts.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, run := range ids {
		wg.Go(func() {
			for step := int64(1); step <= 2; step++ {
				a, b := fmt.Sprintf("%s-%d-a", run, step), fmt.Sprintf("%s-%d-b", run, step)
				res := h.mustRun(batch(run, step, []string{"echo"},
					call("a", "echo", map[string]any{"text": a}), call("b", "echo", map[string]any{"text": b})))
				if got := strings.Join(texts(res), "|"); got != a+"|"+b {
					t.Errorf("%s step %d: results %q, want %q", run, step, got, a+"|"+b)
				}
			}
			h.checkRunInItsPartition(run)
			v, err := reader.Batch(ctxFor(t, 10*time.Second), contracts.BatchID(run, 2))
			if err != nil || len(v.Calls) != 2 || v.Calls[1].Outcome != contracts.OutcomeCompleted {
				t.Errorf("the reader's view of %s: %+v, %v", contracts.BatchID(run, 2), v, err)
			}
			if res, err := h.client.Results(ctxFor(t, 10*time.Second), run, 1); err != nil || len(res.Results) != 2 {
				t.Errorf("the client's results of %s: %v", contracts.BatchID(run, 1), err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, run := range ids {
		h.waitGone(run)
	}
}

// checkRunInItsPartition fails the test unless run's results (two batches, one message
// each), call records, run record and audit records are all in its partition's stores
// and none in another partition's. It runs right after the run's last batch, well within
// the retention.
func (h *harness) checkRunInItsPartition(run string) {
	h.tb.Helper()
	n := h.cfg.Names()
	own := n.PartitionOf(run)
	for _, pn := range n.EachPartition() {
		k := pn.PartitionIndex()
		results := h.subjectCount(pn.ResultsStream(), pn.ResultsWildcard()[:len(pn.ResultsWildcard())-1]+run)
		calls := h.subjectCount(pn.CallRecordsStream(), contracts.RecordSubject(pn.CallsBucket(), contracts.CallKeysOfRun(run)))
		runRec := h.subjectCount(pn.RunRecordsStream(), contracts.RecordSubject(pn.RunsBucket(), contracts.RunKey(run)))
		audit := h.subjectCount(pn.AuditStream(), pn.AuditPrefix()+run)
		if k == own {
			if results != 2 || calls == 0 || runRec != 1 || audit == 0 {
				h.tb.Errorf("run %s in its partition %d: %d results messages (want 2), %d call record revisions, %d run record revisions (want 1), %d audit records",
					run, k, results, calls, runRec, audit)
			}
			continue
		}
		if results+calls+runRec+audit != 0 {
			h.tb.Errorf("run %s (partition %d) has records in partition %d: %d results, %d call, %d run, %d audit",
				run, own, k, results, calls, runRec, audit)
		}
	}
}
