package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
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
func (s *Service) sweepRoute() bus.Route {
	n := s.env.Names
	return bus.Route{Spec: bus.ConsumerSpec{
		Stream: contracts.RecordStream(n.BatchesBucket()), Durable: contracts.ConsumerGateSweeper,
		FilterSubjects: []string{contracts.RecordSubject(n.BatchesBucket(), ">")},
		Records:        true, Expiries: true,
		// No type is ever announced on the archive: only the expiries are work.
		AcceptTypes: []string{bus.TypeRecordExpired},
	}, Handler: s.handleBatchExpired,
		// A sweep that keeps failing is retried rather than given up: the records would
		// otherwise stay for ever.
		Delivery: []bus.DeliveryOption{bus.WithDelivery(-1)}}
}

// handleBatchExpired sweeps the call and ticket records of the batch whose archived record
// expired. A batch the run record holds open is never swept: only a run id reused after
// its run record expired could reach it, and then the records are the new batch's.
func (s *Service) handleBatchExpired(ctx context.Context, d bus.Delivery) error {
	runID, step, ok := batchOfArchiveSubject(s.env.Names, d.Subject)
	if !ok {
		return bus.Permanent(fmt.Errorf("gate: sweep: %q is not a batch archive key", d.Subject))
	}
	log := zerolog.Ctx(ctx).With().Str("run_id", runID).Str("batch_id", contracts.BatchID(runID, step)).Logger()
	run, _, err := s.env.Runs.GetFromLeader(ctx, contracts.RunKey(runID))
	switch {
	case err == nil:
		if held := run.Holds(step); held != nil && held.Phase == contracts.BatchPhaseOpen {
			log.Warn().Msg("the archive of an open batch expired (run id reused after retention?); its records are kept")
			return nil
		}
	case !errors.Is(err, state.ErrNotFound):
		return fmt.Errorf("gate: sweep %s: read run: %w", contracts.BatchID(runID, step), err)
	}
	n := s.env.Names
	for _, bucket := range []string{n.CallsBucket(), n.TicketsBucket()} {
		st, err := s.recordStream(ctx, bucket)
		if err != nil {
			return fmt.Errorf("gate: sweep %s: %s: %w", contracts.BatchID(runID, step), bucket, err)
		}
		// Call keys are {target}.{run}.{step}.{call}, ticket keys {kind}.{run}.{step}.{call}.
		filter := contracts.RecordSubject(bucket, contracts.CallKeysOfBatch(runID, step))
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(filter)); err != nil {
			return fmt.Errorf("gate: sweep %s: purge %s: %w", contracts.BatchID(runID, step), filter, err)
		}
	}
	log.Debug().Msg("finished batch past retention: its call and ticket records removed")
	return nil
}

// recordStream returns the stream of bucket, looked up once per process: a purge needs
// only its name, and a look-up per sweep would add a stream info request per batch.
func (s *Service) recordStream(ctx context.Context, bucket string) (jetstream.Stream, error) {
	if st, ok := s.sweepStreams.Load(bucket); ok {
		return st.(jetstream.Stream), nil
	}
	st, err := s.env.JS.Stream(ctx, contracts.RecordStream(bucket))
	if err != nil {
		return nil, err
	}
	s.sweepStreams.Store(bucket, st)
	return st, nil
}

// batchOfArchiveSubject parses the subject of a batch archive record,
// $KV.{batches}.{run_id}.{step}.
func batchOfArchiveSubject(n contracts.Names, subject string) (runID string, step int64, ok bool) {
	key, found := strings.CutPrefix(subject, contracts.RecordSubject(n.BatchesBucket(), ""))
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
