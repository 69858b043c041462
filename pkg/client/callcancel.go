package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Errors of [Client.CancelCall].
var (
	// ErrCallTerminal: the call is already Completed or Indeterminate; nothing changed.
	ErrCallTerminal = errors.New("call is terminal")
	// ErrCallCancelPending: the cancellation is stored and will be applied, but the call
	// was not seen ending before ctx ended (a Requested call waits for its batch to reach
	// it; a body stopped must return or outlast its grace).
	ErrCallCancelPending = errors.New("call cancel stored, call not seen ended yet")
)

// CallCancelResult says how a cancelled call ended.
type CallCancelResult struct {
	OperationID string `json:"operation_id"`
	// Status is cancelled_before_start, cancelled_in_flight or cancel_acknowledged
	// (contracts.Cancel*), or "completed" / "indeterminate" when the call ended otherwise
	// before the cancellation reached it (an executor's outcome won the compare-and-swap).
	Status  string            `json:"status"`
	Outcome contracts.Outcome `json:"outcome"`
	Reason  string            `json:"reason,omitempty"`
	Actor   string            `json:"actor,omitempty"`
	// Phase is, in a pending error's result, the phase the call was last seen in.
	Phase contracts.PhaseKind `json:"phase,omitempty"`
}

// CallTerminalError is returned (wrapping [ErrCallTerminal]) when the call had ended
// before the cancel: Result says how.
type CallTerminalError struct{ Result CallCancelResult }

func (e *CallTerminalError) Error() string {
	return fmt.Sprintf("call %s is already %s", e.Result.OperationID, e.Result.Outcome)
}
func (e *CallTerminalError) Unwrap() error { return ErrCallTerminal }

// CancelCall cancels the call op (an operation id, "{batch_id}:{call_id}") and returns once
// it is terminal, saying how it ended: cancelled before start (Completed with the error
// "cancelled before start: {reason}"), cancelled in flight (Indeterminate), or the
// tool's acknowledged outcome. actor is recorded as who cancelled (a claim: the api's door
// passes the authenticated actor). A call already terminal is refused with a
// [*CallTerminalError] and nothing is published. The client cannot read batch records, so
// an operation id of no batch is not refused here (the api's door answers 404): the wait
// ends with ctx.
// ctx bounds the wait; when it ends first the error wraps [ErrCallCancelPending].
func (c *Client) CancelCall(ctx context.Context, op, reason, actor string) (CallCancelResult, error) {
	// Watching first: the terminal revision the cancellation leads to cannot come unseen.
	w, err := c.watchCall(ctx, op)
	if err != nil {
		return CallCancelResult{}, err
	}
	defer w.stop()
	if err := w.current(ctx); err != nil {
		if ctx.Err() != nil {
			return CallCancelResult{OperationID: op, Phase: w.lastPhase()}, fmt.Errorf("client: cancel call %s: %w", op, ctx.Err())
		}
		return CallCancelResult{}, err
	}
	// No record yet is a call its batch has not reached: the gate records the cancellation
	// on it (an operation id of no batch is ignored by the gate, and the wait ends with
	// ctx).
	if w.last != nil && w.last.Phase.IsTerminal() {
		return CallCancelResult{}, &CallTerminalError{Result: cancelResult(op, w.last)}
	}
	id := "cancel-" + op + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := c.publish(ctx, c.names.CallCancelSubject(), id, contracts.TypeCallCancel,
		contracts.CallCancel{OperationID: op, Actor: actor, Reason: reason}); err != nil {
		return CallCancelResult{}, err
	}
	rec, err := w.follow(ctx, func(rec *contracts.CallRecord) bool { return rec.Phase.IsTerminal() })
	switch {
	case err == nil:
		return cancelResult(op, rec), nil
	case ctx.Err() != nil:
		res := CallCancelResult{OperationID: op, Phase: w.lastPhase()}
		return res, fmt.Errorf("client: call %s (last seen %s): %w: %w", op, res.Phase, ErrCallCancelPending, context.Cause(ctx))
	default:
		return CallCancelResult{}, err
	}
}

// cancelResult describes the terminal record rec of op.
func cancelResult(op string, rec *contracts.CallRecord) CallCancelResult {
	res := CallCancelResult{OperationID: op, Outcome: rec.Outcome(), Phase: rec.Phase.Kind, Status: string(rec.Outcome())}
	if rec.Cancel != nil {
		res.Status, res.Reason, res.Actor = rec.Cancel.Outcome, rec.Cancel.Reason, rec.Cancel.Actor
	} else if rec.Phase.Kind == contracts.PhaseIndeterminate {
		res.Reason = rec.Phase.Reason
	}
	return res
}

// callWatch follows the record of one call, under any target. A command's caller watches
// before it publishes, so the revision that answers the command cannot come unseen.
type callWatch struct {
	op string
	w  jetstream.KeyWatcher
	// last is the latest revision seen; nil while none was (a call its batch has not
	// reached has no record yet).
	last *contracts.CallRecord
}

// watchCall starts watching the call record of operation op; the watch delivers the
// record as it stands first ([callWatch.current]).
func (c *Client) watchCall(ctx context.Context, op string) (*callWatch, error) {
	runID, step, callID, err := contracts.ParseOperationID(op)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	n, err := c.runNames(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("client: calls: %w", err)
	}
	kv, err := c.js.KeyValue(ctx, n.CallsBucket())
	if err != nil {
		return nil, fmt.Errorf("client: calls: %w", err)
	}
	w, err := kv.Watch(ctx, "*."+contracts.OperationKey(runID, step, callID))
	if err != nil {
		return nil, fmt.Errorf("client: watch call %s: %w", op, err)
	}
	return &callWatch{op: op, w: w}, nil
}

// current reads the record as it stood when the watch started into w.last (nil when there
// was none). It returns ctx's error when ctx ends first.
func (w *callWatch) current(ctx context.Context) error {
	for {
		rec, err := w.next(ctx)
		if err != nil || rec == nil {
			return err
		}
	}
}

// next returns the record's next revision (deletions are skipped) and keeps it in
// w.last, or nil at the end of the values the watch started with. It returns ctx's error
// when ctx ends first, and an error when the watch ends (its connection closed).
func (w *callWatch) next(ctx context.Context) (*contracts.CallRecord, error) {
	for {
		select {
		case e, ok := <-w.w.Updates():
			if !ok { // its subscription closed (the connection did)
				return nil, fmt.Errorf("client: call %s: the watch of its record ended", w.op)
			}
			if e == nil {
				return nil, nil
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec contracts.CallRecord
			if err := contracts.DecodeRecord(e.Value(), &rec); err != nil {
				return nil, fmt.Errorf("client: call %s: %w", w.op, err)
			}
			w.last = &rec
			return &rec, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// follow waits for the first later revision of the record that until accepts and returns
// it. It returns ctx's error when ctx ends first.
func (w *callWatch) follow(ctx context.Context, until func(*contracts.CallRecord) bool) (*contracts.CallRecord, error) {
	for {
		rec, err := w.next(ctx)
		if err != nil {
			return nil, err
		}
		if rec != nil && until(rec) {
			return rec, nil
		}
	}
}

// lastPhase is the phase the call was last seen in ("" when no record was seen).
func (w *callWatch) lastPhase() contracts.PhaseKind {
	if w.last == nil {
		return ""
	}
	return w.last.Phase.Kind
}

func (w *callWatch) stop() { _ = w.w.Stop() }
