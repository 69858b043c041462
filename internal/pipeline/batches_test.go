package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// echoKit is service's test environment on a configuration with one tool, echo, and a
// context that gives the test 30 seconds.
func echoKit(t *testing.T, service string) (*servicetest.Kit, context.Context) {
	t.Helper()
	kit := servicetest.New(t, service, "prefix: awaken\ntools:\n  - id: echo\n", bus.TopologyConfig{})
	ctx, cancel := context.WithTimeout(kit.Ctx, 30*time.Second)
	t.Cleanup(cancel)
	return kit, ctx
}

// TestBatchLivesInTheRunRecordThenTheArchive walks the places a batch record lives: the
// run record while it is open (accepting it is one write of the run record, nothing in
// the archive), the run record finalized, and the archive once the run's next batch
// replaced it — which archives it first, so ReadBatch finds it at every point and a
// resubmission of its batch id is answered from it, never recorded again, even with the
// run idle.
func TestBatchLivesInTheRunRecordThenTheArchive(t *testing.T) {
	kit, ctx := echoKit(t, "batcher")
	env := kit.Env
	const run = "run-lives"
	rec := func(step int64) contracts.BatchRecord {
		return contracts.BatchRecord{Submission: contracts.BatchSubmission{RunID: run, Step: step,
			Calls: []contracts.ToolCall{{CallID: "c", ToolID: "echo"}}}, Hash: "h", Phase: contracts.BatchPhaseOpen}
	}
	read := func(step int64) contracts.BatchRecord {
		t.Helper()
		b, err := pipeline.ReadBatch(ctx, env.Runs, env.Batches, run, step, true)
		if err != nil {
			t.Fatalf("read batch %d: %v", step, err)
		}
		return b
	}
	finalize := func(step int64) {
		t.Helper()
		if _, _, err := env.Runs.Update(ctx, contracts.RunKey(run), func(cur *contracts.RunRecord, _ bool) error {
			cur.Batch.Phase, cur.ActiveStep = contracts.BatchPhaseFinalized, nil
			return nil
		}); err != nil || read(step).Phase != contracts.BatchPhaseFinalized {
			t.Fatalf("finalize %d: %v", step, err)
		}
	}

	if res, err := env.AcceptBatch(ctx, rec(1)); err != nil || !res.Created {
		t.Fatalf("accept step 1: %+v, %v", res, err)
	}
	if _, _, err := env.Batches.Get(ctx, contracts.BatchKey(run, 1)); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("an open batch is in the archive: %v", err)
	}
	if b := read(1); b.Phase != contracts.BatchPhaseOpen {
		t.Fatalf("step 1 reads %s, want open", b.Phase)
	}
	if res, err := env.AcceptBatch(ctx, rec(2)); err != nil || res.Refused == nil || res.Refused.Code != contracts.RejectRunBusy {
		t.Fatalf("step 2 while step 1 is open: %+v, %v; want run_busy", res, err)
	}
	finalize(1)
	if res, err := env.AcceptBatch(ctx, rec(2)); err != nil || !res.Created {
		t.Fatalf("accept step 2: %+v, %v", res, err)
	}
	if a, _, err := env.Batches.Get(ctx, contracts.BatchKey(run, 1)); err != nil || a.Phase != contracts.BatchPhaseFinalized {
		t.Fatalf("step 1 not archived when step 2 replaced it: %+v, %v", a.Phase, err)
	}
	finalize(2)
	// The run is idle and holds step 2: step 1 again is answered from the archive.
	res, err := env.AcceptBatch(ctx, rec(1))
	if err != nil || res.Created || res.Existing == nil || res.Existing.Phase != contracts.BatchPhaseFinalized {
		t.Fatalf("step 1 resubmitted: %+v, %v; want the archived record", res, err)
	}
	if r, _, err := env.Runs.Get(ctx, contracts.RunKey(run)); err != nil || r.Holds(2) == nil || *r.LastStep != 2 {
		t.Fatalf("run record after the resubmission: %+v, %v", r, err)
	}
	if _, err := pipeline.ReadBatch(ctx, env.Runs, env.Batches, run, 9, true); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a step never submitted reads %v, want ErrNotFound", err)
	}
}

// TestFinalizedArchiveOutlivesTheRetentionUntilPublished: the claim of a run's next batch
// archives the finalized batch it replaces before the publisher has published it (a
// publisher down since the finalize). That archive must not expire: its expiry would have
// the gate's sweeper purge the batch's call records, and the restarted publisher would
// find neither the batch nor its calls, so the batch would never be published. The
// retention's clock starts when the publisher marks the archive published.
func TestFinalizedArchiveOutlivesTheRetentionUntilPublished(t *testing.T) {
	kit := servicetest.New(t, "batcher", "prefix: awaken\nretention: { runs: 1s }\ntools:\n  - id: echo\n",
		bus.TopologyConfig{RunsMaxAge: time.Second})
	ctx, cancel := context.WithTimeout(kit.Ctx, 60*time.Second)
	defer cancel()
	env := kit.Env
	archive := func(run string, phase contracts.BatchPhase) {
		t.Helper()
		rec := contracts.BatchRecord{Submission: contracts.BatchSubmission{RunID: run, Step: 1,
			Calls: []contracts.ToolCall{{CallID: "c", ToolID: "echo"}}}, Hash: "h", Phase: phase}
		if created, err := env.ArchiveBatch(ctx, rec); err != nil || !created {
			t.Fatalf("archive %s: %v, %v", run, created, err)
		}
	}
	gone := func(run string) bool {
		_, _, err := env.Batches.GetFromLeader(ctx, contracts.BatchKey(run, 1))
		return errors.Is(err, state.ErrNotFound)
	}
	// Written first, so it would expire first if it carried the retention.
	archive("run-unpublished", contracts.BatchPhaseFinalized)
	archive("run-published", contracts.BatchPhasePublished)
	natstest.WaitFor(t, 30*time.Second, func() bool { return gone("run-published") }, "the published archive to expire")
	if gone("run-unpublished") {
		t.Fatal("the archive of a finalized, unpublished batch expired with the run retention")
	}
	if _, _, err := env.Batches.Update(ctx, contracts.BatchKey("run-unpublished", 1), func(cur *contracts.BatchRecord, _ bool) error {
		return cur.MarkPublished()
	}); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() bool { return gone("run-unpublished") }, "the archive, once published, to expire")
}
