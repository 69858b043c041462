package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// sweepRoute is the gate's durable consumer of the batch archive's expiries
// ([contracts.ConsumerGateSweeper]): when the archived record of a finished batch expires
// (its per-message TTL, the run retention), the server leaves a marker in its place, and
// the sweep removes the batch's call and ticket records — every key of the batch in those
// buckets, all revisions — with one purge request per bucket. A purge stores no message,
// so the sweep adds no write; it runs off every client's path, one retention after the
// batch was published. The archive's other revisions reach this consumer too and are
// acknowledged unread.
// The archive exists once per partition: one durable on each partition's.
func (s *Service) sweepRoutes() []bus.Route {
	return bus.PerPartition(s.env.Names, func(n contracts.Names) bus.Route { return s.sweepRoute(n) })
}

func (s *Service) sweepRoute(n contracts.Names) bus.Route {
	return bus.Route{Spec: bus.ConsumerSpec{
		Stream: contracts.RecordStream(n.BatchesBucket()), Durable: contracts.ConsumerGateSweeper,
		FilterSubjects: []string{contracts.RecordSubject(n.BatchesBucket(), ">")},
		Records:        true, Expiries: true,
		// No type is ever announced on the archive: only the expiries are work.
		AcceptTypes: []string{bus.TypeRecordExpired},
	}, Handler: s.env.Handle(ServiceName, s.handleBatchExpired),
		// A sweep that keeps failing is retried rather than given up: the records would
		// otherwise stay for ever.
		Delivery: []bus.DeliveryOption{bus.WithDelivery(-1)}}
}

// handleBatchExpired sweeps the call and ticket records of the batch whose archived record
// expired, and its keys in the limits ledger (those of the limits keyed by step, whose key
// value is the batch's). A batch the run record holds open is never swept: only a run id
// reused after its run record expired could reach it, and then the records are the new
// batch's.
//
// Its effects are the purges: they store nothing and hand nothing on.
func (s *Service) handleBatchExpired(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	runID, step, ok := batchOfArchiveSubject(s.env.Names, d.Subject)
	if !ok {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: sweep: %q is not a batch archive key", d.Subject))
	}
	batchID := contracts.BatchID(runID, step)
	log := zerolog.Ctx(ctx).With().Str("run_id", runID).Str("batch_id", batchID).Logger()
	// Taken before the run record is read: a ledger write after it (a new batch's
	// decision) is kept by the purge.
	bound, err := s.ledgerPurgeBound(ctx, contracts.LimitKeyStep)
	if err != nil {
		return pipeline.Effects{}, fmt.Errorf("gate: sweep %s: %w", batchID, err)
	}
	run, _, err := s.env.Runs.GetFromLeader(ctx, contracts.RunKey(runID))
	switch {
	case err == nil:
		if held := run.Holds(step); held != nil && held.Phase == contracts.BatchPhaseOpen {
			log.Warn().Msg("the archive of an open batch expired (run id reused after retention?); its records are kept")
			return pipeline.Effects{}, nil
		}
	case !errors.Is(err, state.ErrNotFound):
		return pipeline.Effects{}, fmt.Errorf("gate: sweep %s: read run: %w", batchID, err)
	}
	return pipeline.Effects{Op: batchID, Log: &log, Steps: []pipeline.Effect{
		pipeline.Do(func(ctx context.Context) error {
			n := s.env.Names
			for _, bucket := range []string{n.Of(runID).CallsBucket(), n.TicketsBucket()} {
				st, err := s.recordStream(ctx, bucket)
				if err != nil {
					return fmt.Errorf("gate: sweep %s: %s: %w", batchID, bucket, err)
				}
				// Call keys are {target}.{run}.{step}.{call}, ticket keys {kind}.{run}.{step}.{call}.
				filter := contracts.RecordSubject(bucket, contracts.CallKeysOfBatch(runID, step))
				if err := st.Purge(ctx, jetstream.WithPurgeSubject(filter)); err != nil {
					return fmt.Errorf("gate: sweep %s: purge %s: %w", batchID, filter, err)
				}
			}
			return nil
		}),
		pipeline.Do(func(ctx context.Context) error {
			batchOf := &contracts.BatchSubmission{RunID: runID, Step: step}
			if err := s.purgeLedgerKeys(ctx, contracts.LimitKeyStep, batchID, batchOf, bound); err != nil {
				return err
			}
			zerolog.Ctx(ctx).Debug().Msg("finished batch past retention: its call and ticket records and its ledger keys removed")
			return nil
		}),
	}}, nil
}

// runSweepRoute is the gate's durable consumer of the run records' expiries
// ([contracts.ConsumerGateRunSweeper]), registered only when a host limit is keyed by run:
// the keys of such a limit go with the run record — the run's exactly-once marker — and
// not with a batch, so a run-keyed count or budget holds for as long as the run id is
// known, however long the run stays idle between batches. When a run record expires (its
// per-message TTL, twice the run retention after the run's last batch finished; a record
// with an open batch carries none), the server leaves a marker in its place (kept as long
// as the archive's, half the retention), and the sweep removes the run's keys from the
// ledger with one purge request per run-keyed limit. The runs stream's other revisions
// reach this consumer too and are acknowledged unread.
func (s *Service) runSweepRoutes() []bus.Route {
	if !s.limits.KeyedBy(contracts.LimitKeyRun) {
		return nil
	}
	return bus.PerPartition(s.env.Names, s.runSweepRoute)
}

func (s *Service) runSweepRoute(n contracts.Names) bus.Route {
	return bus.Route{Spec: bus.ConsumerSpec{
		Stream: n.RunRecordsStream(), Durable: contracts.ConsumerGateRunSweeper,
		FilterSubjects: []string{n.RunRecordsFilter()},
		Records:        true, Expiries: true,
		// Only the expiries are work: the revisions announced on the runs stream (a
		// recorded batch) are the gate-batches consumer's.
		AcceptTypes: []string{bus.TypeRecordExpired},
	}, Handler: s.env.Handle(ServiceName, s.handleRunExpired),
		// Retried rather than given up, as the batch sweep: the keys would stay for ever.
		Delivery: []bus.DeliveryOption{bus.WithDelivery(-1)}}
}

// handleRunExpired removes the ledger keys of the limits keyed by run whose value is the
// run whose record expired. A run record that exists again (a run id reused once its record
// expired, or a cancel of a forgotten run that recorded its end) keeps the keys: they go
// when that record expires in turn.
func (s *Service) handleRunExpired(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	runID, _, ok := s.env.Names.RecordKeyOf(contracts.Names.RunsBucket, d.Subject)
	if !ok || runID == "" {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: run sweep: %q is not a run record key", d.Subject))
	}
	log := zerolog.Ctx(ctx).With().Str("run_id", runID).Logger()
	// Taken before the run record is read: the ledger writes of a run that starts under the
	// same id after the read come after it and are kept by the purge.
	bound, err := s.ledgerPurgeBound(ctx, contracts.LimitKeyRun)
	if err != nil {
		return pipeline.Effects{}, fmt.Errorf("gate: run sweep %s: %w", runID, err)
	}
	switch _, _, err := s.env.Runs.GetFromLeader(ctx, contracts.RunKey(runID)); {
	case err == nil:
		log.Debug().Msg("the run record of an expired run exists again; its ledger keys stay with it")
		return pipeline.Effects{}, nil
	case !errors.Is(err, state.ErrNotFound):
		return pipeline.Effects{}, fmt.Errorf("gate: run sweep %s: read run: %w", runID, err)
	}
	return pipeline.Effects{Op: runID, Log: &log, Steps: []pipeline.Effect{
		pipeline.Do(func(ctx context.Context) error {
			if err := s.purgeLedgerKeys(ctx, contracts.LimitKeyRun, "run "+runID, &contracts.BatchSubmission{RunID: runID}, bound); err != nil {
				return err
			}
			zerolog.Ctx(ctx).Debug().Msg("run record expired: its ledger keys removed")
			return nil
		}),
	}}, nil
}

// ledgerPurgeBound returns the limits ledger's stream sequence after its last message, for
// [Service.purgeLedgerKeys] to remove only what was written before it; 0 (and no request)
// when no host limit is keyed by key, and 0 when there is no ledger.
func (s *Service) ledgerPurgeBound(ctx context.Context, key string) (uint64, error) {
	if !s.limits.KeyedBy(key) {
		return 0, nil
	}
	st, err := s.recordStream(ctx, s.env.Names.LimitsBucket())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// No ledger (a deployment set up before limits existed): no key to sweep, and the
		// other records of the sweep still go.
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("limits ledger: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("limits ledger: last sequence: %w", err)
	}
	return info.State.LastSeq + 1, nil
}

// purgeLedgerKeys removes, for every host limit keyed by key, the ledger keys of the key
// value of the run or batch of (sub's RunID and Step, as [contracts.Limit.KeyValue] derives
// it) — the key itself, or every window of it for a windowed limit — with one purge request
// per limit, of the messages stored before bound ([Service.ledgerPurgeBound]). A purge
// stores nothing (no delete marker stays behind) and removes the delete markers an earlier
// delete left (a cancelled run's keys). of names what is swept, for errors.
func (s *Service) purgeLedgerKeys(ctx context.Context, key, of string, sub *contracts.BatchSubmission, bound uint64) error {
	if bound == 0 || !s.limits.KeyedBy(key) {
		return nil
	}
	bucket := s.env.Names.LimitsBucket()
	st, err := s.recordStream(ctx, bucket)
	if err != nil {
		return fmt.Errorf("gate: sweep %s: %s: %w", of, bucket, err)
	}
	for k := range s.limits.Limits() {
		lim := &s.limits.Limits()[k]
		if lim.Key != key {
			continue
		}
		ledgerKey := contracts.LimitLedgerKey(lim.Name, lim.KeyValue(sub), time.Time{})
		filter := contracts.RecordSubject(bucket, ledgerKey)
		if lim.Window > 0 {
			// {name}.{value}.{window start}: every window of the value.
			filter += ".*"
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(filter), jetstream.WithPurgeSequence(bound)); err != nil {
			return fmt.Errorf("gate: sweep %s: purge %s: %w", of, filter, err)
		}
		s.limits.ForgetKey(ledgerKey)
	}
	return nil
}

// recordStream returns the stream of bucket, looked up once per process: a purge needs
// only its name, and a look-up per sweep would add a stream info request per batch.
func (s *Service) recordStream(ctx context.Context, bucket string) (jetstream.Stream, error) {
	if st, ok := s.sweepStreams.Load(bucket); ok {
		return st.(jetstream.Stream), nil
	}
	st, err := s.env.Stream(ctx, contracts.RecordStream(bucket))
	if err != nil {
		return nil, err
	}
	s.sweepStreams.Store(bucket, st)
	return st, nil
}

// batchOfArchiveSubject parses the subject of a batch archive record,
// $KV.{batches}.{run_id}.{step}.
func batchOfArchiveSubject(n contracts.Names, subject string) (runID string, step int64, ok bool) {
	key, _, found := n.RecordKeyOf(contracts.Names.BatchesBucket, subject)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(key, '.')
	if i <= 0 {
		return "", 0, false
	}
	step, err := strconv.ParseInt(key[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return key[:i], step, true
}
