package publisher

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// errArchiveInFlight reports an archived batch record that the create said exists and
// that the stream leader does not show yet. In a cluster the leader refuses a create
// whose expected last sequence (0) is contradicted by a write still in flight on the same
// key — the batcher archiving the same finalized batch as it claims the run's next one —
// before that write is applied, so a read right after it can miss it (seen in make
// chaos-cluster, where such marks were dead-lettered). It is transient: the delivery is
// retried and then finds the record.
var errArchiveInFlight = errors.New("archived batch record not visible yet")

// FaultBeforeFinalize fires after the barrier read the batch and its calls and built the
// results, before the finalize: an operator's resolution recorded on the batch in between
// must still be in the results (tests hold the handler here).
const FaultBeforeFinalize pipeline.FaultPoint = "before-finalize"

// handleOutput is the handler of committed call outputs: check the barrier in its body
// (the batch and its calls read, nothing written), and once every call of the batch is
// terminal return the batch's publication ([Service.publication]).
func (s *Service) handleOutput(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	out, err := pipeline.CallOutputOf(s.env.Names, d)
	if err != nil {
		return pipeline.Effects{}, err
	}
	key := contracts.BatchKey(out.RunID, out.Step)
	// Sequential dispatch makes the last call terminal only after every earlier one, so
	// only its output can open the barrier: for any other output of a sequential batch the
	// immutable part of the record (the calls, the dispatch mode), which the batch cache
	// holds once a fresh read below has put it there, is all there is to check. Dispatch
	// never becomes parallel after submission.
	if cached, ok := s.env.CachedBatch(out.RunID, out.Step); ok && !cached.Parallel {
		sub := &cached.Submission
		if out.Index >= 0 && out.Index < len(sub.Calls)-1 && sub.Calls[out.Index].CallID == out.CallID {
			zerolog.Ctx(ctx).Debug().Str("batch_id", sub.BatchID()).Str("run_id", sub.RunID).Str("call_id", out.CallID).
				Int("index", out.Index).Msg("barrier holds: not the last call")
			return pipeline.Effects{}, nil
		}
	}
	// Otherwise the phase matters, so the record is read fresh rather than from the cache.
	rec, err := s.env.FreshBatch(ctx, out.RunID, out.Step)
	if err != nil {
		// A missing record is not permanent even though the leader confirmed it: the
		// batcher records the batch before any of its calls can have an output, and
		// dropping the last output leaves its batch unpublished for good (make
		// chaos-cluster). It is retried, and dead-lettered on exhaustion only if the record
		// never shows up.
		return pipeline.Effects{}, fmt.Errorf("publisher: load batch: %w", err)
	}
	cached := rec
	s.env.Remember(&cached)
	sub := &rec.Submission
	if out.Index < 0 || out.Index >= len(sub.Calls) || sub.Calls[out.Index].CallID != out.CallID {
		return pipeline.Effects{}, contracts.Reject(contracts.RejectInvalidField,
			"call output names call %d %q, which is not a call of batch %s", out.Index, out.CallID, sub.BatchID())
	}
	log := zerolog.Ctx(ctx).With().Str("batch_id", sub.BatchID()).Str("run_id", sub.RunID).Str("call_id", out.CallID).Logger()
	ctx = log.WithContext(ctx)

	if rec.Phase == contracts.BatchPhasePublished {
		s.progress.forget(key)
		log.Debug().Msg("batch already published")
		return pipeline.Effects{}, nil
	}
	// Sequential dispatch makes the last call terminal only after every earlier one, so
	// only its output can open the barrier. A parallel batch (or one that fell back to
	// sequential dispatch after its probe) may complete in any order.
	if !rec.Parallel && out.Index != len(sub.Calls)-1 {
		log.Debug().Int("index", out.Index).Msg("barrier holds: not the last call")
		return pipeline.Effects{}, nil
	}
	if rec.Parallel {
		ready, err := s.progress.allTerminal(ctx, s.env.Calls, &rec)
		if err != nil || !ready {
			if err == nil {
				log.Debug().Msg("barrier holds: a call is not terminal yet")
			}
			return pipeline.Effects{}, err
		}
	}
	calls, ready, err := s.terminalCalls(ctx, &rec)
	if err != nil || !ready {
		if err == nil {
			log.Debug().Msg("barrier holds: a call is not terminal yet")
		}
		return pipeline.Effects{}, err
	}
	return s.publication(&rec, calls, &log), nil
}

// terminalCalls reads every call record of rec's batch in model order. It reports false
// when any call has no record or is not terminal; a record that belongs to another call
// is permanent.
//
// The records are read with one batch get, which any replica may answer. A terminal
// record never changes again, so a batch whose records all read terminal is final however
// old the replica. A call that reads missing or not terminal is read again from the
// leader of the bucket's stream before the barrier is declared closed: this output is
// acknowledged afterwards, and a stale "not terminal" would leave the batch unpublished
// for good (make chaos-cluster: the last output acked while a replica still showed an
// earlier call running). A call the leader confirms not terminal will publish its own
// output once it is, and that output checks the barrier again.
func (s *Service) terminalCalls(ctx context.Context, rec *contracts.BatchRecord) ([]contracts.CallRecord, bool, error) {
	sub := &rec.Submission
	keys := make([]string, len(sub.Calls))
	for i := range sub.Calls {
		keys[i] = contracts.CallKeyOf(rec, i)
	}
	entries, err := s.env.Calls.GetMany(ctx, keys)
	if err != nil {
		// A batch get that timed out, or one an older auth.conf does not permit: every
		// key is read from the leader below.
		zerolog.Ctx(ctx).Debug().Err(err).Msg("batch get of the call records failed; reading them from the leader")
		entries = map[string]state.Entry[contracts.CallRecord]{}
	}
	for _, key := range keys {
		if e, ok := entries[key]; ok && e.Value.Phase.IsTerminal() {
			continue
		}
		v, rev, err := s.env.Calls.GetFromLeader(ctx, key)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return nil, false, nil
		case err != nil:
			return nil, false, fmt.Errorf("publisher: batch %s: read call record %s: %w", sub.BatchID(), key, err)
		case !v.Phase.IsTerminal():
			return nil, false, nil
		}
		entries[key] = state.Entry[contracts.CallRecord]{Key: key, Value: v, Revision: rev}
	}
	return matchCalls(rec, entries)
}

// matchCalls returns the call records of rec's batch in model order from entries. It
// reports false when any call has no record or is not terminal; a record that belongs to
// another call is permanent.
func matchCalls(rec *contracts.BatchRecord, entries map[string]state.Entry[contracts.CallRecord]) ([]contracts.CallRecord, bool, error) {
	sub := &rec.Submission
	calls := make([]contracts.CallRecord, len(sub.Calls))
	for i := range sub.Calls {
		e, ok := entries[contracts.CallKeyOf(rec, i)]
		if !ok || !e.Value.Phase.IsTerminal() {
			return nil, false, nil
		}
		if err := rec.CheckCall(i, &e.Value); err != nil {
			return nil, false, bus.Permanent(fmt.Errorf("publisher: %w", err))
		}
		calls[i] = e.Value
	}
	return calls, true, nil
}

// batchPublication is what the steps of one batch's publication pass to each other.
type batchPublication struct {
	rec   *contracts.BatchRecord
	calls []contracts.CallRecord
	pub   publication
	// finalizedBefore: a delivery before this one finalized the batch (and may have
	// published it); publishedBefore: the archive says it is published.
	finalizedBefore, publishedBefore bool
}

// publication returns the effects that publish rec's batch, every call of which is
// terminal (calls, in model order): build the results, finalize the batch and release
// its run in one compare-and-swap on the run record, publish its results
// ([Service.publishResults]) unless they already are and send the live tool_result facts,
// and archive the batch as published in the batches bucket (off the path the platform
// waits on: its results are out). Every step tolerates having been done before by a
// delivery that died, or concurrently by another worker: the phase moves only by
// compare-and-swap, and a publication is skipped when the results stream already holds
// it. The finalize hands nothing on: its run-record revision frees the run for its next
// batch, which the platform submits.
func (s *Service) publication(rec *contracts.BatchRecord, calls []contracts.CallRecord, log *zerolog.Logger) pipeline.Effects {
	b := &batchPublication{rec: rec, calls: calls}
	return pipeline.Effects{Op: rec.Submission.BatchID(), Log: log, Steps: []pipeline.Effect{
		// The results built from what the barrier read: a resolution an operator records
		// from here on is found by the finalize (tests hold the operation here).
		pipeline.Step(FaultBeforeFinalize, func(ctx context.Context) (bool, error) {
			var err error
			b.pub, err = s.build(ctx, b.rec, b.calls)
			return true, err
		}),
		pipeline.Commit(func(ctx context.Context) (bool, error) { return s.finalizeBuilt(ctx, b) }),
		pipeline.Publish(func(ctx context.Context) error {
			if b.publishedBefore {
				s.progress.forget(contracts.BatchKey(rec.Submission.RunID, rec.Submission.Step))
				zerolog.Ctx(ctx).Debug().Msg("batch was published concurrently")
				return pipeline.ErrSettled
			}
			return s.publishOutputs(ctx, b.rec, b.calls, b.pub, b.finalizedBefore)
		}),
		pipeline.Do(func(ctx context.Context) error { return s.archive(ctx, b) }),
	}}
}

// finalizeBuilt finalizes the batch of b ([Service.finalize]) and reports whether this
// publication goes on (the archive does not say the batch is published). When an operator
// resolved a call between the barrier's read of the batch and the finalize, the finalized
// batch holds the resolution, and so must the results: they are built again.
func (s *Service) finalizeBuilt(ctx context.Context, b *batchPublication) (bool, error) {
	var resolutions []contracts.BatchResolution
	var err error
	b.finalizedBefore, b.publishedBefore, resolutions, err = s.finalize(ctx, b.rec, b.calls, b.pub.ended)
	if err != nil {
		return false, err
	}
	if !sameResolutions(b.rec.Resolutions, resolutions) {
		b.rec.AdoptResolutions(resolutions)
		if b.pub, err = s.build(ctx, b.rec, b.calls); err != nil {
			return false, err
		}
	}
	return !b.publishedBefore, nil
}

// archive archives b's published batch ([Service.archivePublished]) and counts it, once.
func (s *Service) archive(ctx context.Context, b *batchPublication) error {
	sub := &b.rec.Submission
	marked, err := s.archivePublished(ctx, b.rec, b.calls)
	if err != nil {
		return err
	}
	s.progress.forget(contracts.BatchKey(sub.RunID, sub.Step))
	if marked {
		// Counted once per batch: only the write that moved it to published gets here. The
		// calls first, so that a scrape that shows the batch published shows its calls.
		for _, c := range b.pub.outcomes {
			s.env.Telemetry.CallPublished(c.outcome, c.isError)
		}
		s.env.Telemetry.BatchPublished()
	}
	zerolog.Ctx(ctx).Info().Int("results", len(b.pub.outcomes)).Bool("retried", b.finalizedBefore).Msg("batch published")
	return nil
}

// publishOutputs publishes what the finalized batch owes before its archive: its results
// ([Service.publishResults]), then sends the live tool_result facts (a projection of the
// results, never stored: a call's path stores nothing for them); both before the archive,
// which goes last: a delivery that finds the batch archived as published acks at once,
// so everything the batch owes must be durable by then, and a delivery that dies before
// the archive sends the facts again. A fact that cannot be sent is logged, not retried:
// its readers read the results for the history.
func (s *Service) publishOutputs(ctx context.Context, rec *contracts.BatchRecord, calls []contracts.CallRecord, pub publication, finalizedBefore bool) error {
	if err := s.publishResults(ctx, rec, pub, finalizedBefore); err != nil {
		return err
	}
	if err := s.env.Pub.PublishLive(ctx, pub.facts); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("publisher: a live tool_result fact was not sent")
	}
	s.recordBarrier(ctx, rec, calls)
	return nil
}

// finalize moves the batch open → finalized and releases its run — the run may take its
// next batch, or has ended (an end the batch decided, a state conflict, is recorded in
// the same write) — in one compare-and-swap on the run record, which holds the open
// batch. It reports whether an earlier delivery had finalized the batch, and whether the
// archive says it is published.
//
// A run record that no longer holds the batch has moved on to a later batch, which a
// claim does only to a finalized batch, after archiving it; so the archive says what
// happened (read from the leader: a replica behind the archive write would drop the
// output). Only a record that neither holds is an error, retried: the batcher records a
// batch before any of its calls has an output.
//
// It returns the operators' resolutions the finalized batch holds (see
// pkg/contracts/resolve.go): a resolution is recorded on the open batch by
// compare-and-swap on the same run record, so the finalize either commits after it and
// returns it, or commits first and the resolution becomes a correction. The results are
// built from what is returned, never from an earlier read.
func (s *Service) finalize(ctx context.Context, rec *contracts.BatchRecord, calls []contracts.CallRecord, ended *contracts.RunEnded) (finalizedBefore, publishedBefore bool, resolutions []contracts.BatchResolution, err error) {
	sub := &rec.Submission
	batchID := sub.BatchID()
	_, _, err = s.env.Runs.Update(ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, exists bool) error {
		finalizedBefore, resolutions = false, nil
		if !exists {
			return contracts.ErrBatchNotHeld
		}
		held := cur.Holds(sub.Step)
		if held != nil && held.Hash != rec.Hash {
			return fmt.Errorf("%w: run %s holds batch %s with another hash", contracts.ErrInvalidPersistedState, sub.RunID, batchID)
		}
		if held != nil {
			resolutions = append([]contracts.BatchResolution(nil), held.Resolutions...)
		}
		err := cur.FinalizeBatch(sub.Step, calls, ended, s.env.Now())
		if errors.Is(err, contracts.ErrBatchFinalized) {
			finalizedBefore = true
			return state.ErrNoChange
		}
		return err
	})
	switch {
	case err == nil:
		return finalizedBefore, false, resolutions, nil
	case errors.Is(err, contracts.ErrBatchNotHeld):
		archived, _, aerr := s.env.Batches.GetFromLeader(ctx, contracts.BatchKey(sub.RunID, sub.Step))
		switch {
		case errors.Is(aerr, state.ErrNotFound):
			return false, false, nil, fmt.Errorf("publisher: finalize %s: %w", batchID, err)
		case aerr != nil:
			return false, false, nil, fmt.Errorf("publisher: finalize %s: read archive: %w", batchID, aerr)
		case archived.Hash != rec.Hash:
			return false, false, nil, bus.Permanent(fmt.Errorf("publisher: finalize %s: %w: archived with another hash", batchID, contracts.ErrInvalidPersistedState))
		case archived.Phase == contracts.BatchPhaseOpen:
			return false, false, nil, bus.Permanent(fmt.Errorf("publisher: finalize %s: %w: archived open", batchID, contracts.ErrInvalidPersistedState))
		}
		return true, archived.Phase == contracts.BatchPhasePublished, archived.Resolutions, nil
	case errors.Is(err, contracts.ErrInvalidPersistedState) || errors.Is(err, contracts.ErrCallMismatch) ||
		errors.Is(err, contracts.ErrIncomplete):
		// Update confirmed these on the leader's value: they are not a lagging replica's.
		return false, false, nil, bus.Permanent(fmt.Errorf("publisher: finalize %s: %w", batchID, err))
	}
	return false, false, nil, fmt.Errorf("publisher: finalize %s: %w", batchID, err)
}

// readAuditHead reads the last record of run's audit chain from the audit stream's leader,
// the anchor [contracts.BatchRecord.AuditHead] the archive write records: a read per batch,
// no write, made after the results are out, so never on the path the platform waits on. A record still being appended while the batch
// finishes (a decision appended beside the request that ran its call) may be missed: the
// anchor is then further back in the chain, never a false one. A chain that cannot be read leaves the batch without an anchor rather than holding
// its results: the warning says so.
func (s *Service) readAuditHead(ctx context.Context, runID string) *contracts.AuditHead {
	m, err := s.env.ReadLastFromLeader(ctx, s.env.Names.Of(runID).AuditStream(), s.env.Names.AuditSubject(runID))
	if err != nil {
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			zerolog.Ctx(ctx).Warn().Err(err).Str("run_id", runID).Msg("cannot read the run's audit chain head: the batch is finalized without a tail anchor")
		}
		return nil
	}
	l, err := auditchain.LinkOf(m.Header)
	if err != nil {
		return nil
	}
	return &contracts.AuditHead{N: l.N, Hash: l.Hash}
}

// sameResolutions reports whether a and b hold the same resolutions (each is recorded
// once and never removed, so the command ids say it).
func sameResolutions(a, b []contracts.BatchResolution) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || a[i].CommandID != b[i].CommandID {
			return false
		}
	}
	return true
}

// archivePublished records in the batches bucket that rec's batch, finalized, has its
// results on the results stream: it creates the archived record as published or, when
// the claim of the run's next batch archived it first (finalized), moves that one to
// published. It reports whether this call made the batch published.
func (s *Service) archivePublished(ctx context.Context, rec *contracts.BatchRecord, calls []contracts.CallRecord) (bool, error) {
	sub := &rec.Submission
	batchID := sub.BatchID()
	// rec may be the copy read before this delivery's finalize: the archived record moves
	// through the same transitions the batch did (open → finalized → published), so the
	// state machine in pkg/contracts is the only place a phase changes.
	done := *rec
	if err := done.Finalize(calls); err != nil && !errors.Is(err, contracts.ErrBatchFinalized) {
		return false, fmt.Errorf("publisher: archive %s: %w", batchID, err)
	}
	if err := done.MarkPublished(); err != nil && !errors.Is(err, contracts.ErrBatchPublished) {
		return false, fmt.Errorf("publisher: archive %s: %w", batchID, err)
	}
	head := s.readAuditHead(ctx, sub.RunID)
	done.AnchorAudit(head)
	created, err := s.env.ArchiveBatch(ctx, done)
	if err != nil || created {
		return created, err
	}
	marked := false
	_, _, err = s.env.Batches.Update(ctx, contracts.BatchKey(sub.RunID, sub.Step), func(cur *contracts.BatchRecord, exists bool) error {
		marked = false
		if !exists {
			return errArchiveInFlight
		}
		err := cur.MarkPublished()
		if errors.Is(err, contracts.ErrBatchPublished) {
			return state.ErrNoChange
		}
		if err == nil {
			cur.AnchorAudit(head)
		}
		marked = err == nil
		return err
	})
	if err != nil {
		// Update confirmed these on the leader's value: they are not a lagging replica's.
		// errArchiveInFlight is not among them: see its comment.
		if errors.Is(err, contracts.ErrInvalidPersistedState) || errors.Is(err, contracts.ErrInvalidTransition) {
			return false, bus.Permanent(fmt.Errorf("publisher: mark %s published: %w", batchID, err))
		}
		return false, fmt.Errorf("publisher: mark %s published: %w", batchID, err)
	}
	return marked, nil
}

// recordBarrier records how long the barrier held the batch's results: a publisher.barrier
// span on the batch's trace from the first call that became terminal (its result the first
// one held) to the publication that released them all. It carries the number of calls
// and of indeterminate ones. A redelivery that publishes again records it again.
func (s *Service) recordBarrier(ctx context.Context, rec *contracts.BatchRecord, calls []contracts.CallRecord) {
	now := s.env.Now()
	first, indeterminate := now, 0
	for i := range calls {
		c := &calls[i]
		stage := contracts.StageCompleted
		if c.Phase.Kind == contracts.PhaseIndeterminate {
			stage, indeterminate = contracts.StageIndeterminate, indeterminate+1
		}
		if at, ok := c.MarkTime(stage); ok && at.Before(first) {
			first = at
		}
	}
	sub := &rec.Submission
	s.env.Telemetry.RecordSpan(ctx, "", telemetry.SpanBarrier, first, now,
		attribute.String("awaken.batch_id", sub.BatchID()), attribute.String("awaken.run_id", sub.RunID),
		attribute.Int("awaken.calls", len(calls)), attribute.Int("awaken.calls_indeterminate", indeterminate),
		attribute.Bool("awaken.parallel", rec.Parallel))
}
