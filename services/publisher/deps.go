package publisher

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Deps is what the publisher works with: the runtime and basics every service has, the
// batch records it reads and archives, the call records behind the barrier, the run
// records it finalizes and releases, the results and audit streams it reads, and the
// publisher of the results.
type Deps struct {
	pipeline.Runtime
	pipeline.Basics
	pipeline.BatchReader
	Archive
	Streams
	Calls   *state.Store[contracts.CallRecord]
	Runs    *state.Store[contracts.RunRecord]
	Batches *state.Store[contracts.BatchRecord]
	// Pub publishes the results (atomically, in model order) and the live facts.
	Pub *bus.Publisher
}

// Archive archives a finished batch in the batches bucket.
type Archive interface {
	ArchiveBatch(ctx context.Context, rec contracts.BatchRecord) (bool, error)
}

// Streams reads the results and audit streams: whether a batch's results are out, the
// head of a run's audit chain, and the largest message the server takes.
type Streams interface {
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
	StreamReader() pipeline.StreamReader
	ReadLastFromLeader(ctx context.Context, stream, subject string) (*jetstream.RawStreamMsg, error)
	MaxPayload() int64
}

// DepsOf returns the publisher's dependencies from the environment.
func DepsOf(env *pipeline.Env) Deps {
	return Deps{
		Runtime: env, Basics: env.Basics(), BatchReader: env, Archive: env, Streams: env,
		Calls: env.Calls, Runs: env.Runs, Batches: env.Batches, Pub: env.Pub,
	}
}
