package servicerun_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestSetupAndWaitTopology(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		wantErr  bool
	}{
		{"one replica on one server", 1, false},
		// Refused at once, not retried until the deadline: no retry can cure it.
		{"three replicas on one server", 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			_, js := srv.Conn(t)
			cfg := &config.Config{Storage: config.Storage{Replicas: tc.replicas}}
			log := zerolog.Nop()

			// Before setup, a service waiting for the topology waits (until its deadline).
			short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if err := servicerun.WaitTopology(short, js, cfg.Names(), log); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitTopology before setup: %v, want a deadline error", err)
			}

			ctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel2()
			start := time.Now()
			err := servicerun.Setup(ctx, js, cfg, log)
			if tc.wantErr {
				if err == nil || time.Since(start) > 10*time.Second {
					t.Fatalf("Setup = %v after %s, want a prompt error", err, time.Since(start))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
				t.Fatalf("second Setup (idempotent): %v", err)
			}
			if err := servicerun.WaitTopology(ctx, js, cfg.Names(), log); err != nil {
				t.Fatalf("WaitTopology after setup: %v", err)
			}
		})
	}
}

// TestSetupRemovesWhatEarlierVersionsLeft: a deployment of the version before the gate
// read its work from the records has a work stream with the gate-requests durable and the
// batcher's outputs durable on the call records' stream. Setup deletes them (the work
// stream although it still holds a message, with a warning) and leaves every current
// durable; a second setup finds nothing to delete.
func TestSetupRemovesWhatEarlierVersionsLeft(t *testing.T) {
	js, ctx := startServer(t)
	cfg := &config.Config{}
	names := cfg.Names()
	log := zerolog.Nop()
	if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
		t.Fatal(err)
	}
	work := names.ObsoleteStreams()[0]
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: work, Subjects: []string{names.Prefix + ".work.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, names.Prefix+".work.gate.r1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: contracts.ObsoleteConsumerGateRequests}); err != nil {
		t.Fatal(err)
	}
	for _, durable := range []string{contracts.ObsoleteConsumerBatcherOutputs, contracts.ConsumerPublisher} {
		if _, err := js.CreateOrUpdateConsumer(ctx, names.CallRecordsStream(), jetstream.ConsumerConfig{Durable: durable}); err != nil {
			t.Fatal(err)
		}
	}

	for range 2 { // the second finds nothing to delete
		if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Stream(ctx, work); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("obsolete stream %s after setup: %v, want not found", work, err)
		}
		if _, err := js.Consumer(ctx, names.CallRecordsStream(), contracts.ObsoleteConsumerBatcherOutputs); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("obsolete consumer after setup: %v, want not found", err)
		}
		if _, err := js.Consumer(ctx, names.CallRecordsStream(), contracts.ConsumerPublisher); err != nil {
			t.Fatalf("current consumer %s after setup: %v", contracts.ConsumerPublisher, err)
		}
	}
}

// TestSetupMovesTheResumeCommandsToTheControlStream: a tickets stream of a version whose
// clients published their resume commands into it (with gate-resume reading them there)
// gives the resume subjects up to the control stream, whose gate-resume reads them now; the
// tickets stream keeps the gate's subjects only, and its gate-resume is deleted.
func TestSetupMovesTheResumeCommandsToTheControlStream(t *testing.T) {
	js, ctx := startServer(t)
	cfg := &config.Config{}
	names := cfg.Names()
	resume := []string{names.TicketResumeSubject(), names.TicketResumeAPISubject()}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: names.TicketsStream(), AllowMsgTTL: true, Duplicates: 2 * time.Minute,
		Subjects: append([]string{names.TicketOpenedSubject(), names.TicketResolvedSubject(), names.TicketRejectedSubject()}, resume...)}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: names.ControlStream(), Subjects: []string{names.Prefix + ".runs.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, names.TicketsStream(), jetstream.ConsumerConfig{Durable: contracts.ConsumerGateResume,
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: resume}); err != nil {
		t.Fatal(err)
	}
	if err := servicerun.Setup(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	tickets, err := js.Stream(ctx, names.TicketsStream())
	if err != nil {
		t.Fatal(err)
	}
	if subjects := tickets.CachedInfo().Config.Subjects; len(subjects) != 3 || slices.Contains(subjects, names.TicketResumeSubject()) {
		t.Fatalf("tickets stream subjects %v, want the gate's three", subjects)
	}
	if _, err := js.Consumer(ctx, names.TicketsStream(), contracts.ConsumerGateResume); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("gate-resume on the tickets stream after setup: %v, want not found", err)
	}
	for _, subject := range resume {
		ack, err := js.Publish(ctx, subject, []byte("{}"))
		if err != nil || ack.Stream != names.ControlStream() {
			t.Fatalf("a resume command on %s: %+v %v, want it stored in %s", subject, ack, err, names.ControlStream())
		}
	}
}

// TestSetupMigratesTheOpenBatchesOnce: setup records in the deployment's metadata that it
// moved the open batches of the versions before the run record held the open batch, and
// a setup of a deployment so marked does not scan the run records again (an open batch
// stored the old way after the mark stays where it is). A deployment without the mark, as
// an earlier version left it, is migrated by its next setup, which marks it.
func TestSetupMigratesTheOpenBatchesOnce(t *testing.T) {
	js, ctx := startServer(t)
	cfg := &config.Config{}
	names := cfg.Names()
	log := zerolog.Nop()
	if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
		t.Fatal(err)
	}
	submissions := func() jetstream.StreamConfig {
		t.Helper()
		st, err := js.Stream(ctx, names.SubmissionsStream())
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config
	}
	if _, ok := submissions().Metadata[servicerun.OpenBatchesMigratedMetadataKey]; !ok {
		t.Fatalf("setup did not record the migration: metadata %v", submissions().Metadata)
	}

	// An open batch as the earlier versions stored it: the run record claims the step, the
	// batch record is open in the batches bucket.
	put := func(bucket, key string, v any) {
		t.Helper()
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	const run = "old-open"
	sub := contracts.BatchSubmission{RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "echo", Arguments: json.RawMessage(`{}`)}}}
	put(names.RunsBucket(), contracts.RunKey(run), map[string]any{"run_id": run, "active_step": 1})
	put(names.BatchesBucket(), contracts.BatchKey(run, 1),
		contracts.BatchRecord{Submission: sub, Hash: sub.Hash(), Phase: contracts.BatchPhaseOpen, CreatedAt: time.Now().UTC()})
	holdsBatch := func() bool {
		t.Helper()
		kv, err := js.KeyValue(ctx, names.RunsBucket())
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, contracts.RunKey(run))
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]json.RawMessage
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			t.Fatal(err)
		}
		_, ok := r["batch"]
		return ok
	}

	if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
		t.Fatal(err)
	}
	if holdsBatch() {
		t.Fatal("a setup of a deployment that recorded the migration scanned the run records again")
	}

	unmarked := submissions()
	delete(unmarked.Metadata, servicerun.OpenBatchesMigratedMetadataKey)
	if _, err := js.UpdateStream(ctx, unmarked); err != nil {
		t.Fatal(err)
	}
	if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
		t.Fatal(err)
	}
	if !holdsBatch() {
		t.Fatal("a setup of a deployment without the mark did not migrate its open batch")
	}
	if _, ok := submissions().Metadata[servicerun.OpenBatchesMigratedMetadataKey]; !ok {
		t.Fatal("the migrating setup did not record the migration")
	}
}

// startServer starts an embedded server for one test and returns its JetStream and a
// context that ends with the test, or after a minute.
func startServer(t *testing.T) (jetstream.JetStream, context.Context) {
	t.Helper()
	_, js := natstest.Start(t).Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return js, ctx
}
