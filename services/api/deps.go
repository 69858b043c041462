package api

import (
	"context"
	"crypto/ed25519"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Deps is what the api works with: the runtime and basics every service has, the records
// it reads (its read model and its checks before a command), the buckets it watches and
// writes (tools, pauses, limits), the NATS services it offers and the replies it sends,
// the publisher of its audit records, and the key that signs what its MCP door audits.
type Deps struct {
	pipeline.Runtime
	pipeline.Basics
	pipeline.PauseReader
	Buckets
	Doors
	Runs    *state.Store[contracts.RunRecord]
	Batches *state.Store[contracts.BatchRecord]
	Calls   *state.Store[contracts.CallRecord]
	Tickets *state.Store[contracts.ResumeTicket]
	// Pub publishes the api's audit records (a tool paused or resumed).
	Pub *bus.Publisher
	// AuditKey signs the audit records of the MCP door (nil: unsigned).
	AuditKey ed25519.PrivateKey
}

// Buckets opens and watches the buckets the api reads beside the records, and reads the
// history the policy backtest replays.
type Buckets interface {
	ToolPauses(ctx context.Context) (map[string]contracts.ToolPause, error)
	ToolsBucket(ctx context.Context) (jetstream.KeyValue, error)
	ToolPausesBucket(ctx context.Context) (jetstream.KeyValue, error)
	LimitsBucket(ctx context.Context) (jetstream.KeyValue, error)
	WatchBucket(ctx context.Context, bucket string) (jetstream.KeyWatcher, error)
	StreamReader() pipeline.StreamReader
}

// Doors are the api's NATS doors: its micro service, the replies to detached requests,
// the notices it listens to, and the state of its connection.
type Doors interface {
	AddMicroService(cfg micro.Config) (micro.Service, error)
	PublishReply(msg *nats.Msg) error
	ListenNotices(subject string, handle func(*nats.Msg)) (stop func() error, err error)
	FlushSubscriptions() error
	Connected() bool
}

// DepsOf returns the api's dependencies from the environment.
func DepsOf(env *pipeline.Env) Deps {
	return Deps{
		Runtime: env, Basics: env.Basics(), PauseReader: env, Buckets: env, Doors: env,
		Runs: env.Runs, Batches: env.Batches, Calls: env.Calls, Tickets: env.Tickets,
		Pub: env.Pub, AuditKey: env.AuditKey,
	}
}
