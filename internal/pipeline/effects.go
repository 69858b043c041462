package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Every pipeline handler has one shape: it reads what it needs, decides, and returns its
// effects — the state changes it commits, each naming who works next because of it, and
// what the committed state implies published — without running them. One runtime
// ([Env.Handle], [Env.Apply]) runs the effects in order, each followed by its fault point,
// and hands the outcome to the consume loop, which acknowledges, retries with back-off or
// dead-letters. So a handler never commits, publishes or reaches a fault point itself
// (internal/archrules checks it), and reading a handler's return shows its hand-offs.

// EffectHandler is the shape of every pipeline handler: decide from the delivery and the
// state it reads, and return the [Effects] of the decision. An error is the delivery's
// outcome as for a [bus.Handler] (a [*contracts.Rejection] or [bus.Permanent] error
// dead-letters, any other is retried); nothing is run then.
type EffectHandler func(ctx context.Context, d bus.Delivery) (Effects, error)

// Effects is what a handler decided for one operation: the steps, run in order by the
// runtime. The zero value has nothing to do (the delivery is acknowledged).
type Effects struct {
	// Op is the operation id the fault points name (a batch id, an operation id).
	Op string
	// Log, when set, is the operation's logger (with its batch_id, run_id, call_id): the
	// steps run under a context that carries it (zerolog.Ctx). Unset, the steps log with
	// the delivery context's logger.
	Log   *zerolog.Logger
	Steps []Effect
}

// Effect is one step of an operation: a state change ([Commit]), the publishes the
// committed state implies ([Publish]), or another boundary tests crash at ([Step]).
type Effect struct {
	point FaultPoint
	// handOffs is who the step's writes hand work to; checked for commits only.
	handOffs []HandOff
	commit   bool
	run      func(ctx context.Context) (reached bool, err error)
}

// ErrSettled, returned by a step, ends the operation there without an error: what the
// remaining steps would do has been done (by an earlier delivery, or by another worker),
// so the delivery is acknowledged and the steps after it are not run.
var ErrSettled = errors.New("pipeline: operation settled by an earlier delivery")

// HandOff names who works next because of a state change: the consumer whose work a
// written revision announces (records.go decides it from the record's state). A writer
// names the hand-offs its commit makes; the runtime checks them against the revisions
// stored, so the name at the writer cannot drift from what the write does.
type HandOff string

const (
	// ToGate: a run-record revision that records a batch, [contracts.TypeBatchRecorded].
	ToGate HandOff = HandOff(contracts.ServiceGate)
	// ToExecutor: a call record handed to its executor, [contracts.TypeExecRequest].
	ToExecutor HandOff = "executor"
	// ToBarrier: a call's output, its terminal record, [contracts.TypeCallOutput]: the
	// work of the publisher's barrier and of the gate's sequential dispatch.
	ToBarrier HandOff = "barrier"
)

// handOffOf is the hand-off a stored revision of type ceType makes, or "".
func handOffOf(ceType string) HandOff {
	switch ceType {
	case contracts.TypeBatchRecorded:
		return ToGate
	case contracts.TypeExecRequest:
		return ToExecutor
	case contracts.TypeCallOutput:
		return ToBarrier
	}
	return ""
}

// Commit is the state change of an operation, handing work to the consumers named by to
// (none: a write no one consumes, such as a decision that awaits an approval). write
// reports whether it committed anything: a write that finds its change recorded by an
// earlier delivery reports false, reaches no fault point and is not checked.
//
// After a committed write the runtime compares to with the hand-offs of the revisions
// write stored: every one stored must be named, and every one named must be stored —
// except that a commit naming several may store any of them (a decision that may allow
// or block). A mismatch is a defect of the writer: it is reported to
// [Env.OnHandOffMismatch] (tests fail on it) and logged; the write stands.
func Commit(write func(ctx context.Context) (committed bool, err error), to ...HandOff) Effect {
	return Effect{point: FaultAfterCommit, handOffs: to, commit: true, run: write}
}

// Publish is what the committed state implies published (events on subjects; nil:
// nothing, the commit is its own output). The [FaultAfterPublish] point follows it: the
// boundary between the durable outputs and the acknowledgement.
func Publish(publish func(ctx context.Context) error) Effect {
	return Effect{point: FaultAfterPublish, run: func(ctx context.Context) (bool, error) {
		if publish == nil {
			return true, nil
		}
		return true, publish(ctx)
	}}
}

// Step is a step of an operation followed by the fault point named by point when step
// reports that it reached it (a ledger write that was made, a slot passed on).
func Step(point FaultPoint, step func(ctx context.Context) (reached bool, err error)) Effect {
	return Effect{point: point, run: step}
}

// Do is a step with no fault point after it: work between the state changes that a
// crash test has no reason to stop at (an archive after the results are out, a metric).
func Do(do func(ctx context.Context) error) Effect {
	return Effect{run: func(ctx context.Context) (bool, error) { return false, do(ctx) }}
}

// Then returns e with steps appended.
func (e Effects) Then(steps ...Effect) Effects {
	e.Steps = append(e.Steps, steps...)
	return e
}

// ErrRaced, returned by a step, means its compare-and-swap lost to another writer: the
// record changed since the handler read it, and the step wrote nothing. [Env.Handle] then
// runs the handler again at once, to decide from the records as they are now — what a
// redelivery would do, without its back-off — at most [MaxRaces] times in a row.
var ErrRaced = errors.New("record changed concurrently")

// MaxRaces bounds how many times in a row [Env.Handle] decides again after a lost
// compare-and-swap: every writer of a record moves it forward, so a handler that keeps
// losing faces a storm, and its delivery is retried later.
const MaxRaces = 16

// Handle returns the consume loop's handler of h: run h, then its effects ([Env.Apply]);
// when a step lost a race ([ErrRaced]), run h again. Every route of every pipeline
// service is built with it.
func (e *Env) Handle(service string, h EffectHandler) bus.Handler {
	return func(ctx context.Context, d bus.Delivery) error {
		for range MaxRaces {
			eff, err := h(ctx, d)
			if err != nil {
				return err
			}
			if err := e.Apply(ctx, service, eff); !errors.Is(err, ErrRaced) {
				return err
			}
		}
		return fmt.Errorf("%s: %d concurrent writers in a row: %w", service, MaxRaces, ErrRaced)
	}
}

// Apply runs the steps of eff in order, each followed by its fault point, and returns the
// first error (nil when a step settled the operation, [ErrSettled]). It is the runtime of
// [Env.Handle], and of work that starts from a timer or a request rather than a delivery.
func (e *Env) Apply(ctx context.Context, service string, eff Effects) error {
	op := operation{env: e, service: service, id: eff.Op}
	if eff.Log != nil {
		ctx = eff.Log.WithContext(ctx)
	}
	for _, step := range eff.Steps {
		err := e.applyStep(ctx, op, step)
		if errors.Is(err, ErrSettled) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// applyStep runs one step; a commit under an observer of the revisions it stores.
func (e *Env) applyStep(ctx context.Context, op operation, step Effect) error {
	if step.point == "" {
		_, err := step.run(ctx)
		return err
	}
	if !step.commit {
		return op.step(ctx, step.point, func() (bool, error) { return step.run(ctx) })
	}
	var (
		mu     sync.Mutex
		stored []HandOff
	)
	wctx := state.ObserveWrites(ctx, func(_, _ string, hdr nats.Header) {
		typ, _, _ := cloudevent.HeaderAttribute(hdr, cloudevent.HeaderType)
		if h := handOffOf(typ); h != "" {
			mu.Lock()
			stored = append(stored, h)
			mu.Unlock()
		}
	})
	return op.step(ctx, step.point, func() (bool, error) {
		committed, err := step.run(wctx)
		if err == nil && committed {
			mu.Lock()
			e.checkHandOffs(ctx, op, step.handOffs, stored)
			mu.Unlock()
		}
		return committed, err
	})
}

// HandOffMismatch describes a commit whose stored revisions handed work to other
// consumers than its writer named.
type HandOffMismatch struct {
	Service, Op   string
	Named, Stored []HandOff
}

func (m HandOffMismatch) Error() string {
	return fmt.Sprintf("%s: operation %s named hand-offs [%s] but stored [%s]", m.Service, m.Op, joinHandOffs(m.Named), joinHandOffs(m.Stored))
}

// checkHandOffs reports a mismatch between the hand-offs a commit named and those its
// writes stored: a stored one that is not named, or — for a commit naming exactly one —
// none stored.
func (e *Env) checkHandOffs(ctx context.Context, op operation, named, stored []HandOff) {
	ok := true
	for _, h := range stored {
		if !slices.Contains(named, h) {
			ok = false
		}
	}
	if len(named) == 1 && len(stored) == 0 {
		ok = false
	}
	if ok {
		return
	}
	m := HandOffMismatch{Service: op.service, Op: op.id, Named: named, Stored: stored}
	if e.OnHandOffMismatch != nil {
		e.OnHandOffMismatch(m)
	}
	e.Log.Error().Str("service", op.service).Str("operation", op.id).Msg(m.Error())
}

func joinHandOffs(hs []HandOff) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = string(h)
	}
	return strings.Join(s, " ")
}
