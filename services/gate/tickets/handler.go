// Package tickets is the gate's parked calls: the durable ticket of a call that waits for
// an approval, a client's result or a due time, the JetStream-scheduled timers of its due
// time and approval deadline, and the resolution of a ticket — a resume command (an
// approval, a denial, an edit of the arguments, a client's result) or a timer that fires.
//
// It decides and validates; the gate's dispatch writes. What a resolution needs of the
// call records — read a call, move it into execution, gate edited arguments again, commit
// a resolution and publish its outputs — it asks through [Dispatch], which the gate
// implements; the package never imports the gate (an archrule says so).
package tickets

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// MaxCASAttempts bounds the compare-and-swap retries of one handler on one record. Every
// writer of a call record moves it forward, so a handler that keeps losing is facing a
// storm; it returns a transient error and the message is redelivered later.
const MaxCASAttempts = 16

// ErrRaced means another writer changed the record between our read and our write. A
// step of a handler's effects that returns it wrote nothing, and the runtime runs the
// handler again to decide from the record as it is now ([pipeline.ErrRaced]).
var ErrRaced = pipeline.ErrRaced

// Dispatch is what resolving a ticket needs of the gate's dispatch, which owns the call
// records and the hand-over to the executors. The resolutions are effects the ticket
// handlers return; the dispatch builds them, the runtime runs them.
type Dispatch interface {
	// LoadCall reads the record of call i of b and its revision (0: none yet).
	LoadCall(ctx context.Context, b *contracts.BatchRecord, i int) (contracts.CallRecord, uint64, error)
	// EnterUnlessPaused moves rec, resolved to run, into execution, or completes it
	// blocked when pause (read before) pauses its tool.
	EnterUnlessPaused(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, pause *contracts.ToolPause) error
	// PolicyChain runs the host and run policies over call (edited arguments) of b.
	PolicyChain(b *contracts.BatchRecord, call contracts.ToolCall) contracts.GateOutcome
	// CommitResolution returns the effects of a resolution: write rec (moved and marked
	// ResolvedBy) at rev and delete the ticket at ticketRev — a lost compare-and-swap is
	// [ErrRaced] and writes nothing — then publish res's outputs and the work it implies.
	CommitResolution(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, rev, ticketRev uint64, res Resolution) pipeline.Effects
	// RedeliveredResolution returns the effects that finish a resolution this very input
	// already committed.
	RedeliveredResolution(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, res Resolution) pipeline.Effects
}

// Handler resolves tickets: it handles the resume commands and the timers, and opens,
// schedules and deletes the tickets the dispatch parks calls on.
type Handler struct {
	env      Deps
	dispatch Dispatch
	log      zerolog.Logger
}

// New returns the ticket handler of the gate whose dispatch is d.
func New(env Deps, d Dispatch) *Handler {
	return &Handler{env: env, dispatch: d, log: env.Log}
}

// logged returns eff, run under the logger of ctx (the command's or timer's fields, and
// the run, batch and call once the handler located them).
func logged(ctx context.Context, eff pipeline.Effects) pipeline.Effects {
	eff.Log = zerolog.Ctx(ctx)
	return eff
}

// withCall adds the batch, call and run of call i of b to the logger of ctx.
func withCall(ctx context.Context, b *contracts.BatchRecord, i int) context.Context {
	sub := &b.Submission
	log := zerolog.Ctx(ctx).With().Str("run_id", sub.RunID).Str("batch_id", sub.BatchID()).
		Str("call_id", sub.Calls[i].CallID).Logger()
	return log.WithContext(ctx)
}
