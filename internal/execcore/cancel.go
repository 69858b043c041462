package execcore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ReasonRunCancelled is the Indeterminate reason of a call whose body was stopped because
// its run was cancelled. It is the reason the gate seals the run's calls with, before it
// tells the executors to stop their bodies; a stopped body's call that this executor still
// owns ends the same way.
const ReasonRunCancelled = "cancelled"

// errRunCancelled is the cancellation cause of a tool context stopped by a run cancel.
var errRunCancelled = errors.New("run cancelled")

// runCancels tracks the contexts of the calls in flight in this process by run, so a run
// cancellation stops their bodies: a Go tool sees its context cancelled, an MCP server
// gets notifications/cancelled (the SDK sends it when the call's context ends), and a
// WebAssembly instance is closed (the engine closes modules when their context ends).
type runCancels struct {
	mu    sync.Mutex
	byRun map[string]map[*context.CancelCauseFunc]struct{}
	// byOp is the same contexts by operation id, for the cancellation of one call: a set,
	// since a duplicate request of a call is tracked too (until it sees the call is not its).
	byOp map[string]map[*context.CancelCauseFunc]struct{}
}

// track returns a context of ctx that a cancellation of runID cancels, and the function
// that stops tracking it (and releases it).
func (r *runCancels) track(ctx context.Context, runID, op string) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	key := &cancel
	r.mu.Lock()
	if r.byRun == nil {
		r.byRun = map[string]map[*context.CancelCauseFunc]struct{}{}
		r.byOp = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	if r.byOp[op] == nil {
		r.byOp[op] = map[*context.CancelCauseFunc]struct{}{}
	}
	r.byOp[op][key] = struct{}{}
	if r.byRun[runID] == nil {
		r.byRun[runID] = map[*context.CancelCauseFunc]struct{}{}
	}
	r.byRun[runID][key] = struct{}{}
	r.mu.Unlock()
	return cctx, func() {
		r.mu.Lock()
		delete(r.byRun[runID], key)
		delete(r.byOp[op], key)
		if len(r.byOp[op]) == 0 {
			delete(r.byOp, op)
		}
		if len(r.byRun[runID]) == 0 {
			delete(r.byRun, runID)
		}
		r.mu.Unlock()
		cancel(context.Canceled)
	}
}

// cancelRun cancels every tracked call of runID and returns how many there were.
func (r *runCancels) cancelRun(runID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for cancel := range r.byRun[runID] {
		(*cancel)(errRunCancelled)
	}
	return len(r.byRun[runID])
}

// listen subscribes handle (core NATS) to subject, which carries what (named in an
// error); without a connection there is nothing to listen on.
func (x *Executor) listen(subject, what string, handle nats.MsgHandler) (*nats.Subscription, error) {
	if x.env.Conn == nil {
		return nil, nil
	}
	sub, err := x.env.Conn.Subscribe(subject, handle)
	if err != nil {
		return nil, fmt.Errorf("%s: subscribe to %s: %w", x.opts.Service, what, err)
	}
	return sub, nil
}

// stopRun stops the calls in flight of the run a gate's stop notice names. The gate sends
// it once it has recorded the run's end and sealed the run's open batch, so a body is never
// stopped — and its call never committed by this executor — before the seal: the call is
// already Indeterminate("cancelled") by the gate, written outside its batch's sequence,
// and nothing its stop commits can hand the batch's next call over.
func (x *Executor) stopRun(rc *contracts.RunCancel) {
	if n := x.cancels.cancelRun(rc.RunID); n > 0 {
		x.env.Log.Info().Str("run_id", rc.RunID).Int("calls", n).Msg("run cancelled; stopping its calls in flight")
	}
}

// sealCancelled ends a call whose body was stopped by its run's cancellation: it becomes
// Indeterminate(ReasonRunCancelled) if this delivery still owns it (else it keeps what the
// gate or another delivery committed), and its output is announced once terminal.
func (x *Executor) sealCancelled(ctx context.Context, key string, req contracts.ExecRequest, seq uint64, attempt uint16, marked bool, op string) error {
	rec, err := x.seal(ctx, key, req, ReasonRunCancelled, telemetry.ReasonCancelled, func(cur *contracts.CallRecord) bool {
		return holds(cur, attempt, seq, marked)
	})
	if err != nil || !rec.Phase.IsTerminal() {
		return err
	}
	zerolog.Ctx(ctx).Info().Str("phase", string(rec.Phase.Kind)).Msg("call stopped by its run's cancellation")
	return x.announce(ctx, req, rec, op)
}
