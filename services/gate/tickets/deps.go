package tickets

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Deps is what the ticket handler works with: the runtime and basics of the gate, the
// tickets store, the batch records it reads, the pauses and the tools bucket (edits
// check the catalog), and the publisher of its events and timers.
type Deps struct {
	pipeline.Runtime
	pipeline.Basics
	pipeline.BatchReader
	pipeline.PauseReader
	ToolsOpener
	Tickets *state.Store[contracts.ResumeTicket]
	Pub     *bus.Publisher
}

// ToolsOpener opens the tools bucket (the catalog an edit is checked against).
type ToolsOpener interface {
	ToolsBucket(ctx context.Context) (jetstream.KeyValue, error)
}

// DepsOf returns the ticket handler's dependencies from the environment.
func DepsOf(env *pipeline.Env) Deps {
	return Deps{
		Runtime: env, Basics: env.Basics(), BatchReader: env, PauseReader: env, ToolsOpener: env,
		Tickets: env.Tickets, Pub: env.Pub,
	}
}
