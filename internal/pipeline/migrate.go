package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Versions before the run record held the open batch (docs/operations.md, "Upgrades and
// compatibility") left an open batch in three places this version does not look at
// together: the run record claimed the run ({"run_id", "active_step"}, no "batch"), the
// batch record (phase open) sat in the batches bucket, which is now the archive of
// finished batches, and its call records were keyed {run_id}.{step}.{call_key}, without
// the executor target that now leads the key. The work that moved them on (gate
// requests, executor requests, outputs) was on the work stream, which setup deletes.
// [MigrateOpenBatches] moves such a batch to where this version keeps an open batch, so
// its services finish it as their own.

// ReasonInterruptedByUpgrade is the Indeterminate reason of a call that an executor of a
// version before the run record held the open batch had entered (its body may have run)
// and not finished, under a recovery policy that never replays it.
const ReasonInterruptedByUpgrade = "interrupted_by_upgrade: the call was entered by an earlier version's executor that did not finish it"

// MigrateOpenBatches finds every run record that claims an open batch without holding it
// (written by a version before the run record held the open batch) and moves that batch
// into the run record, its call records under this version's keys first:
//
//   - a call with no record has not been decided: the gate decides it;
//   - a call decided, parked or finished keeps its record (a finished one's revision is its
//     output, which the publisher's barrier and the sequential dispatch read);
//   - a call handed to its executor and not entered gets its input, which makes the
//     revision its executor request (the old request went with the work stream);
//   - a call entered and unfinished is recovered as an executor recovers it: run again as
//     its next attempt when its policy replays and attempts remain, else Indeterminate
//     ([ReasonInterruptedByUpgrade]).
//
// The run record's write that holds the batch is the gate's work for it, as when the
// batcher records one; the old open record is then removed from the archive (purged, so
// the publisher's archive of the finished batch is a first write). Every step is
// idempotent: a migration cut short is completed by the next setup. It reads every run
// record once (a run record expires with the run retention, so the scan is bounded by the
// runs of one retention) and returns how many batches it moved.
//
// Run it with no service of the earlier version running (those versions cannot run beside
// this one): `awaken setup` and `awaken dev` run it after the topology is ensured, until
// one run of it completes (servicerun.OpenBatchesMigratedMetadataKey).
func MigrateOpenBatches(ctx context.Context, js jetstream.JetStream, cfg *config.Config, log zerolog.Logger) (int, error) {
	e, err := NewEnv(ctx, js.Conn(), js, cfg, log)
	if err != nil {
		return 0, err
	}
	e.Service = "setup"
	runs, err := e.Runs.List(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("pipeline: migrate open batches: %w", err)
	}
	moved := 0
	for key, run := range runs {
		r := run.Value
		if r.ActiveStep == nil || r.Batch != nil {
			continue
		}
		ok, err := e.migrateOpenBatch(ctx, key, run.Revision, r)
		if err != nil {
			return moved, err
		}
		if ok {
			moved++
		}
	}
	return moved, nil
}

// migrateOpenBatch moves the open batch run r claims (revision rev of key) into r.
func (e *Env) migrateOpenBatch(ctx context.Context, key string, rev uint64, r contracts.RunRecord) (bool, error) {
	step := *r.ActiveStep
	batchID := contracts.BatchID(r.RunID, step)
	log := e.Log.With().Str("batch_id", batchID).Str("run_id", r.RunID).Logger()
	b, _, err := e.Batches.GetFromLeader(ctx, contracts.BatchKey(r.RunID, step))
	switch {
	case errors.Is(err, state.ErrNotFound):
		log.Warn().Msg("run record claims a batch that has no record; not migrated")
		return false, nil
	case err != nil:
		return false, fmt.Errorf("pipeline: migrate %s: %w", batchID, err)
	case b.Phase != contracts.BatchPhaseOpen:
		log.Warn().Str("phase", string(b.Phase)).Msg("run record claims a batch that is no longer open; not migrated")
		return false, nil
	}
	for i := range b.Submission.Calls {
		if err := e.migrateCall(ctx, &b, i); err != nil {
			return false, fmt.Errorf("pipeline: migrate %s: %w", batchID, err)
		}
	}
	if _, _, err := e.Runs.Update(ctx, key, func(cur *contracts.RunRecord, exists bool) error {
		if !exists || cur.Batch != nil || cur.ActiveStep == nil || *cur.ActiveStep != step {
			return state.ErrNoChange
		}
		held := b
		cur.Batch = &held
		if cur.LastStep == nil || *cur.LastStep < step {
			last := step
			cur.LastStep = &last
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("pipeline: migrate %s: hold the batch in its run record: %w", batchID, err)
	}
	if err := purgeKey(ctx, e.JS, e.Names.BatchesBucket(), contracts.BatchKey(r.RunID, step)); err != nil {
		return false, fmt.Errorf("pipeline: migrate %s: %w", batchID, err)
	}
	if r.Ended != nil {
		log.Warn().Str("reason", r.Ended.Reason).Msg("migrated the open batch of a run that ended: its calls are left as recorded")
	}
	log.Info().Uint64("revision", rev).Msg("moved an open batch of an earlier version into its run record")
	return true, nil
}

// migrateCall moves call i of b from its key of the earlier versions to this version's,
// as MigrateOpenBatches describes. A call already under its new key is left alone.
func (e *Env) migrateCall(ctx context.Context, b *contracts.BatchRecord, i int) error {
	call := b.Submission.Calls[i]
	oldKey := contracts.OperationKey(b.Submission.RunID, b.Submission.Step, call.CallID)
	rec, _, err := e.Calls.GetFromLeader(ctx, oldKey)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("read call %s: %w", call.CallID, err)
	}
	now := e.Now()
	switch {
	case rec.ExecutingUnentered() && rec.Input == nil && rec.SlotWait == "":
		err = rec.CarryInput(rec.Arguments(call.Arguments))
	case rec.Phase.Kind == contracts.PhaseExecuting && rec.Entered:
		err = recoverEntered(&rec, call, now)
	}
	if err != nil {
		return fmt.Errorf("call %s: %w", call.CallID, err)
	}
	switch _, err := e.Calls.Create(ctx, contracts.CallKeyOf(b, i), rec); {
	case errors.Is(err, state.ErrExists):
	case err != nil:
		return fmt.Errorf("call %s: %w", call.CallID, err)
	}
	return purgeKey(ctx, e.JS, e.Names.CallsBucket(), oldKey)
}

// recoverEntered is an executor's recovery of an entered call whose delivery died, for a
// call whose delivery went with the work stream: a policy that replays runs it again as
// its next attempt, handed over with its input (not entered, so an executor takes it); a
// never_replay call, or one out of attempts, is Indeterminate.
func recoverEntered(rec *contracts.CallRecord, call contracts.ToolCall, now time.Time) error {
	if rec.Policy.Mode == contracts.ModeNeverReplay {
		return rec.MarkIndeterminate(ReasonInterruptedByUpgrade, now)
	}
	switch err := rec.Requeue(now); {
	case errors.Is(err, contracts.ErrAttemptsExhausted):
		return rec.MarkIndeterminate(ReasonInterruptedByUpgrade, now)
	case err != nil:
		return err
	}
	return rec.CarryInput(rec.Arguments(call.Arguments))
}

// purgeKey removes every revision of key from bucket's stream, leaving no marker.
func purgeKey(ctx context.Context, js jetstream.JetStream, bucket, key string) error {
	s, err := js.Stream(ctx, contracts.RecordStream(bucket))
	if err != nil {
		return fmt.Errorf("purge %s/%s: %w", bucket, key, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(contracts.RecordSubject(bucket, key))); err != nil {
		return fmt.Errorf("purge %s/%s: %w", bucket, key, err)
	}
	return nil
}
