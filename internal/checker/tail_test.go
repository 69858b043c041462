package checker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// shortLived is a topology whose results, tickets and control streams keep a message one
// second (on file, so that it survives a restart of the server).
var shortLived = bus.TopologyConfig{ResultsMaxAge: time.Second,
	TicketsMaxAge: time.Second, ControlMaxAge: time.Second, RunsMaxAge: time.Second}

// publishBatch publishes the one-call results message of run's step 1 and returns its
// history entry.
func publishBatch(t *testing.T, ctx context.Context, js jetstream.JetStream, names contracts.Names, run string) Batch {
	t.Helper()
	sub := contracts.BatchSubmission{RunID: run, Step: 1, Calls: []contracts.ToolCall{{CallID: "c0", ToolID: "echo"}}}
	id := sub.BatchID()
	res := contracts.BatchResults{BatchID: id, RunID: run,
		Results:   []contracts.ToolResultEvent{{BatchID: id, RunID: run, CallID: "c0", ToolID: "echo", Outcome: contracts.OutcomeCompleted}},
		Finalized: contracts.BatchFinalized{BatchID: id, RunID: run, Step: 1, CallIDs: []string{"c0"}}}
	ev, err := cloudevent.NewEvent("results-"+run, "test", contracts.TypeBatchResults, res)
	if err != nil {
		t.Fatal(err)
	}
	// Retried: the server may have just restarted.
	natstest.WaitFor(t, 30*time.Second, func() bool {
		_, err := js.PublishMsg(ctx, cloudevent.EncodeMsg(names.ResultsSubject(run), ev))
		return err == nil
	}, "the results of "+run+" stored")
	return Batch{Submission: sub, SubmittedAt: time.Now()}
}

// waitAgedOut waits until the results stream has aged out its first n messages.
func waitAgedOut(t *testing.T, ctx context.Context, js jetstream.JetStream, names contracts.Names, n uint64) {
	t.Helper()
	natstest.WaitFor(t, 30*time.Second, func() bool {
		st, err := js.Stream(ctx, names.ResultsStream())
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.FirstSeq > n
	}, fmt.Sprintf("the first %d results messages to expire", n))
}

// TestTail_aResultReadBeforeItExpiredCounts: a batch whose results expired before the
// run was checked is published for the tail, which read them while they were there (the
// snapshot read at the end, [Read], has the batch lost); and the tail reads on across a
// server restart.
func TestTail_aResultReadBeforeItExpiredCounts(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Conn(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	names := contracts.NewNames("")
	if err := bus.EnsureTopology(ctx, js, names, shortLived); err != nil {
		t.Fatal(err)
	}
	tail := Follow(ctx, js, names)
	defer tail.Stop()

	h := History{Batches: []Batch{publishBatch(t, ctx, js, names, "early")}}
	waitAgedOut(t, ctx, js, names, 1)
	srv.Restart(t)
	h.Batches = append(h.Batches, publishBatch(t, ctx, js, names, "late"))

	obs, err := tail.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep := Check(h, obs, Rules{}); !rep.OK() || rep.Lost != 0 {
		t.Errorf("tail: %s %v, want no violation", rep.Summary(), rep.Violations)
	}
	end, err := Read(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	if rep := Check(h, end, Rules{}); rep.Lost != 1 {
		t.Errorf("read at the end: %s, want the expired batch lost (what the tail is for)", rep.Summary())
	}
	exp, err := tail.Expiries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exp.AgedOut[names.ResultsStream()] < 1 {
		t.Errorf("%s: want the results message counted as aged out", exp.Summary(names))
	}
}

// TestTail_aResultThatExpiredUnreadFailsTheSnapshot: a results message that expired before
// the tail read it is not taken for a lost batch: the snapshot fails with ErrMissed,
// naming the stream and the sequence.
func TestTail_aResultThatExpiredUnreadFailsTheSnapshot(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Conn(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	names := contracts.NewNames("")
	if err := bus.EnsureTopology(ctx, js, names, shortLived); err != nil {
		t.Fatal(err)
	}
	publishBatch(t, ctx, js, names, "unread")
	waitAgedOut(t, ctx, js, names, 1)
	tail := Follow(ctx, js, names) // started too late: sequence 1 is gone
	defer tail.Stop()
	publishBatch(t, ctx, js, names, "read")
	_, err := tail.Snapshot(ctx)
	if !errors.Is(err, ErrMissed) {
		t.Fatalf("snapshot: %v, want ErrMissed", err)
	}
	t.Log(err)
}

// TestTail_agedOutCountsEveryPartition: the aged-out results figure counts every
// partition's results stream, a run of partition 1 included.
func TestTail_agedOutCountsEveryPartition(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Conn(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	names := contracts.NewNames("")
	names.Partitions = 2
	if err := bus.EnsureTopology(ctx, js, names, shortLived); err != nil {
		t.Fatal(err)
	}
	tail := Follow(ctx, js, names)
	defer tail.Stop()
	run := ""
	for i := 0; run == ""; i++ {
		if r := fmt.Sprintf("aged-%d", i); names.PartitionOf(r) == 1 {
			run = r
		}
	}
	publishBatch(t, ctx, js, names, run)
	waitAgedOut(t, ctx, js, names.Partition(1), 1)
	exp, err := tail.Expiries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := exp.Summary(names), "results=1 (p0=0,p1=1)"; !strings.HasSuffix(got, want) {
		t.Errorf("%s: want it to end %q", got, want)
	}
}
