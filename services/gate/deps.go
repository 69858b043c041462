package gate

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/limits"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// Deps is what the gate works with: the runtime and basics every service has, the batch,
// call and run records it decides on, the pauses, the notices that stop a running call,
// the streams it sweeps and checkpoints, the audit appender, the publisher of its events
// and audit records, and the dependencies of its limits ledger and ticket handler.
type Deps struct {
	pipeline.Runtime
	pipeline.Basics
	pipeline.BatchReader
	pipeline.PauseReader
	pipeline.Notices
	Streams
	Calls   *state.Store[contracts.CallRecord]
	Runs    *state.Store[contracts.RunRecord]
	Batches *state.Store[contracts.BatchRecord]
	// Pub publishes the gate's events, corrections and audit records (sealed and chained).
	Pub     *bus.Publisher
	Limits  limits.Deps
	Tickets tickets.Deps
}

// Streams binds the streams the gate purges (the sweep) and checkpoints (the audit
// streams), and hands out the audit chains its publisher appends through (one per
// partition), which the checkpoints cover.
type Streams interface {
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
	AuditChains() auditlog.Partitioned
}

// DepsOf returns the gate's dependencies from the environment.
func DepsOf(env *pipeline.Env) Deps {
	return Deps{
		Runtime: env, Basics: env.Basics(), BatchReader: env, PauseReader: env, Notices: env, Streams: env,
		Calls: env.Calls, Runs: env.Runs, Batches: env.Batches, Pub: env.Pub,
		Limits: limits.DepsOf(env), Tickets: tickets.DepsOf(env),
	}
}
