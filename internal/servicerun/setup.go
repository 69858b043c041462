package servicerun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Server error codes (nats-server's JSStreamReplicasNotSupportedErr and
// JSStreamInvalidConfigF) that no retry can cure: a configuration asking for replicas a
// single server cannot have, or a stream configuration the server refuses.
const (
	errCodeReplicasNotSupported jetstream.ErrorCode = 10074
	errCodeInvalidStreamConfig  jetstream.ErrorCode = 10052
)

// permanent reports whether err is one of the refusals above.
func permanent(err error) bool {
	if errors.Is(err, ErrPartitionsMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == errCodeReplicasNotSupported || apiErr.ErrorCode == errCodeInvalidStreamConfig)
}

// Retry pacing of [Setup] and [WaitTopology]: a JetStream cluster elects its meta leader
// within seconds, so start fast and settle at a modest poll.
const (
	retryFirst   = 200 * time.Millisecond
	retryMax     = 2 * time.Second
	attemptLimit = 10 * time.Second
)

// Setup creates or updates every stream and bucket of cfg, with the replicas and storage
// of cfg.Storage. It is the privileged step of a least-privilege deployment (`awaken
// setup`, run once before the services, as the NATS admin user); the services then start
// with [Options.NoEnsure]. It is idempotent.
//
// A server that is still starting, or a cluster without a meta leader yet or with a peer
// not yet joined, answers with timeouts, "temporarily unavailable" or "no suitable peers
// for placement": Setup retries until ctx ends. Only a configuration the server can never
// accept (3 replicas on a single server, an invalid stream configuration) is returned at
// once.
func Setup(ctx context.Context, js jetstream.JetStream, cfg *config.Config, log zerolog.Logger) error {
	topology := TopologyFor(cfg)
	names := cfg.Names()
	if err := retry(ctx, log, "ensure streams and buckets", func(ctx context.Context) (bool, error) {
		// A recorded partition count is never changed in place.
		if err := CheckPartitions(ctx, js, names); err != nil {
			return false, err
		}
		_, err := bus.ApplyTopology(ctx, js, names, topology, log)
		return err == nil, err
	}); err != nil {
		return err
	}
	if err := retry(ctx, log, "remove what earlier versions left", func(ctx context.Context) (bool, error) {
		err := RemoveObsolete(ctx, js, names, log)
		return err == nil, err
	}); err != nil {
		return err
	}
	// In a cluster, the partitions' leaders on different nodes (best effort).
	if topology.Replicas > 1 && names.PartitionCount() > 1 {
		moved := bus.SpreadPartitionLeaders(ctx, js, names, log)
		log.Info().Int("moved", moved).Int("partitions", names.PartitionCount()).Msg("partition leaders spread over the cluster's nodes")
	}
	return migrateOpenBatchesOnce(ctx, js, cfg, log)
}

// OpenBatchesMigratedMetadataKey is the key of the submissions stream's metadata under
// which [Setup] records that it moved the open batches of the versions before the run
// record held the open batch ([pipeline.MigrateOpenBatches]). This version never leaves a
// batch there, so once the migration completed, no setup of the deployment scans the run
// records again; a deployment without the key (set up by an earlier version, or whose
// migration was cut short) is migrated by the next setup.
const OpenBatchesMigratedMetadataKey = "awaken_open_batches_migrated"

// migrateOpenBatchesOnce runs [pipeline.MigrateOpenBatches] unless the deployment recorded
// that it ran, and records it when it completed.
func migrateOpenBatchesOnce(ctx context.Context, js jetstream.JetStream, cfg *config.Config, log zerolog.Logger) error {
	names := cfg.Names()
	var migrated bool
	if err := retry(ctx, log, "read whether the open batches were migrated", func(ctx context.Context) (bool, error) {
		st, err := js.Stream(ctx, names.SubmissionsStream())
		if err != nil {
			return false, err
		}
		_, migrated = st.CachedInfo().Config.Metadata[OpenBatchesMigratedMetadataKey]
		return true, nil
	}); err != nil || migrated {
		return err
	}
	// Not under retry's attempt deadline: it reads every run record once, and each step
	// it takes is idempotent, so a setup run again completes one cut short.
	n, err := pipeline.MigrateOpenBatches(ctx, js, cfg, log)
	if n > 0 {
		log.Info().Int("batches", n).Msg("moved open batches of an earlier version into their run records")
	}
	if err != nil {
		return fmt.Errorf("app: move the open batches of earlier versions into their run records: %w", err)
	}
	return retry(ctx, log, "record that the open batches were migrated", func(ctx context.Context) (bool, error) {
		st, err := js.Stream(ctx, names.SubmissionsStream())
		if err != nil {
			return false, err
		}
		sc := st.CachedInfo().Config
		if _, ok := sc.Metadata[OpenBatchesMigratedMetadataKey]; ok {
			return true, nil
		}
		sc.Metadata = maps.Clone(sc.Metadata)
		if sc.Metadata == nil {
			sc.Metadata = map[string]string{}
		}
		sc.Metadata[OpenBatchesMigratedMetadataKey] = "true"
		_, err = js.UpdateStream(ctx, sc)
		return err == nil, err
	})
}

// Plan returns what [Setup] would change in the streams and buckets of cfg, changing
// nothing (`awaken setup --dry-run`).
func Plan(ctx context.Context, js jetstream.JetStream, cfg *config.Config, log zerolog.Logger) ([]bus.Change, error) {
	var plan []bus.Change
	err := retry(ctx, log, "read the streams and buckets", func(ctx context.Context) (bool, error) {
		var err error
		if err := CheckPartitions(ctx, js, cfg.Names()); err != nil {
			return false, err
		}
		plan, err = bus.PlanTopology(ctx, js, cfg.Names(), TopologyFor(cfg))
		return err == nil, err
	})
	return plan, err
}

// RemoveObsolete deletes the streams and durables of earlier versions that nothing reads
// or writes any more ([contracts.Names.ObsoleteStreams], the Obsolete* consumers of
// pkg/contracts): the work stream with its gate-requests durable, the batcher's outputs
// durable on the call records' stream, and gate-resume on the tickets stream (the resume
// commands are in the control stream). What is already gone is skipped, so it is
// idempotent. A gate request, executor request or output still on the work stream is not
// read by this version: the open batch it belonged to is finished from its records
// ([pipeline.MigrateOpenBatches], which Setup runs next). A resume command still on the
// tickets stream is not read either: the approver repeats it.
func RemoveObsolete(ctx context.Context, js jetstream.JetStream, names contracts.Names, log zerolog.Logger) error {
	for _, name := range names.ObsoleteStreams() {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("app: look up obsolete stream %s: %w", name, err)
		}
		if n := st.CachedInfo().State.Msgs; n > 0 {
			log.Warn().Str("stream", name).Uint64("messages", n).
				Msg("deleting an obsolete stream that still holds messages (this version reads none of them)")
		}
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("app: delete obsolete stream %s: %w", name, err)
		}
		log.Info().Str("stream", name).Msg("deleted an obsolete stream")
	}
	obsolete := []struct{ stream, durable string }{
		{names.Partition(0).CallRecordsStream(), contracts.ObsoleteConsumerBatcherOutputs},
		// The resume commands are stored in the control stream, where the gate's
		// gate-resume reads them; its namesake on the tickets stream reads nothing.
		{names.TicketsStream(), contracts.ConsumerGateResume},
	}
	for _, o := range obsolete {
		err := js.DeleteConsumer(ctx, o.stream, o.durable)
		switch {
		case err == nil:
			log.Info().Str("stream", o.stream).Str("consumer", o.durable).Msg("deleted an obsolete consumer")
		case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		default:
			return fmt.Errorf("app: delete obsolete consumer %s on %s: %w", o.durable, o.stream, err)
		}
	}
	return nil
}

// WaitTopology waits until the buckets every service reads exist, which
// [bus.EnsureTopology] creates after every stream, so the topology the pipeline needs is
// then in place. A service started with [Options.NoEnsure] calls it so that its start does
// not race `awaken setup`. It looks the buckets up through the service's own user, so it
// names only those every service may see: the counters bucket, which only the executors
// open, is created before the runs bucket, the last one waited for here.
func WaitTopology(ctx context.Context, js jetstream.JetStream, names contracts.Names, log zerolog.Logger) error {
	// Partition 0's runs bucket comes after every other partition's stores.
	buckets := []string{names.BatchesBucket(), names.CallsBucket(), names.TicketsBucket(), names.RunsBucket()}
	return retry(ctx, log, "wait for the streams and buckets (created by `awaken setup`)", func(ctx context.Context) (bool, error) {
		for _, b := range buckets {
			if _, err := js.KeyValue(ctx, b); err != nil {
				return false, fmt.Errorf("bucket %s: %w", b, err)
			}
		}
		return true, nil
	})
}

// retry runs attempt, each under its own deadline, until it reports done, fails with a
// [permanent] error, or ctx ends. It logs the first failure and then every tenth, so a
// long wait is visible without flooding the log.
func retry(ctx context.Context, log zerolog.Logger, what string, attempt func(context.Context) (bool, error)) error {
	delay := retryFirst
	for n := 0; ; n++ {
		actx, cancel := context.WithTimeout(ctx, attemptLimit)
		done, err := attempt(actx)
		cancel()
		if done {
			if n > 0 {
				log.Info().Int("attempts", n+1).Msg(what + ": done")
			}
			return nil
		}
		if permanent(err) {
			return fmt.Errorf("app: %s: %w", what, err)
		}
		if n%10 == 0 {
			log.Warn().Err(err).Int("attempt", n+1).Msg(what + ": not yet, retrying")
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("app: %s: %w (last error: %w)", what, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, retryMax)
	}
}
