package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// This file is the client's side of cancellation and resolution: a run's cancellation, a
// call's cancellation and an operator's resolution of an indeterminate call, each sent to
// the gate and followed until the gate has applied it.

// ErrCancelPending is wrapped by [Client.CancelRun] when the cancellation was stored but
// the run was not seen ended before ctx ended: the gate will still apply it (sending it
// again is harmless), but a batch submitted now may still be accepted.
var ErrCancelPending = errors.New("run cancel stored, run not seen ended yet")

// cancelHedgeEvery is how often CancelRun, while its subscription has said nothing, reads
// the events stream for the run's announcement: a plain subscription loses what arrives
// during a reconnect, and a run ended before (its announcement long stored) is announced
// again under the same id, which the stream drops but subscribers still get — unless
// they miss it.
const cancelHedgeEvery = 2 * time.Second

// CancelRun cancels runID and returns once the run has durably ended: the gate recorded
// the end on the run record (so every later submission of the run is refused with
// run_cancelled, or run_ended for a run that had ended otherwise before) and sealed its
// open batch, and announced it with io.awaken.run.ended.v1 on the run's events subject —
// the event returned. Its Reason is "cancelled", or the earlier end's reason. ctx bounds
// the wait; when it ends first the error wraps [ErrCancelPending].
//
// It subscribes to the run's events subject before publishing the command, so the
// announcement of this very cancellation cannot arrive unseen before the subscription;
// every [cancelHedgeEvery] without it, it also reads the announcement from the events
// stream, in case the subscription lost it.
func (c *Client) CancelRun(ctx context.Context, runID, reason string, opts ...CancelOption) (contracts.RunEndedEvent, error) {
	o := cancelOptions{check: func(ctx context.Context) (contracts.RunEndedEvent, bool, error) {
		return c.runEndedFromStream(ctx, runID)
	}}
	for _, opt := range opts {
		opt(&o)
	}
	if err := contracts.ValidateID("run_id", runID); err != nil {
		return contracts.RunEndedEvent{}, fmt.Errorf("client: %w", err)
	}
	sub, err := c.nc.SubscribeSync(c.names.EventsSubject(runID))
	if err != nil {
		return contracts.RunEndedEvent{}, fmt.Errorf("client: subscribe to the events of run %s: %w", runID, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.Cancel(ctx, runID, reason); err != nil {
		return contracts.RunEndedEvent{}, err
	}
	pending := func() error {
		return fmt.Errorf("client: run %s: %w: %w", runID, ErrCancelPending, context.Cause(ctx))
	}
	for {
		wait, cancel := context.WithTimeout(ctx, cancelHedgeEvery)
		msg, err := sub.NextMsgWithContext(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return contracts.RunEndedEvent{}, pending()
		case errors.Is(err, context.DeadlineExceeded):
			ended, found, err := o.check(ctx)
			if ctx.Err() != nil {
				return contracts.RunEndedEvent{}, pending()
			}
			if err == nil && found {
				return ended, nil
			}
			continue // not stored yet (or the read failed): keep waiting
		case err != nil:
			return contracts.RunEndedEvent{}, fmt.Errorf("client: waiting for run %s to end: %w", runID, err)
		}
		if ended, ok := runEnded(msg.Header, msg.Data, runID); ok {
			return ended, nil
		}
	}
}

// CancelOption configures [Client.CancelRun].
type CancelOption func(*cancelOptions)

type cancelOptions struct {
	check func(ctx context.Context) (contracts.RunEndedEvent, bool, error)
}

// CheckEndedWith makes CancelRun hedge its subscription with check instead of a read of
// the events stream: a caller that may read the run records (the api) asks them whether
// the run has ended. check answers the run's end and whether it has one.
func CheckEndedWith(check func(ctx context.Context) (contracts.RunEndedEvent, bool, error)) CancelOption {
	return func(o *cancelOptions) { o.check = check }
}

// runEnded decodes a message of the run's events subject as its io.awaken.run.ended.v1
// announcement; ok is false for any other event (facts, progress).
func runEnded(h map[string][]string, data []byte, runID string) (contracts.RunEndedEvent, bool) {
	ev, err := cloudevent.DecodeMsg(h, data)
	if err != nil || ev.Type != contracts.TypeRunEnded {
		return contracts.RunEndedEvent{}, false
	}
	var ended contracts.RunEndedEvent
	if err := json.Unmarshal(ev.Data, &ended); err != nil || ended.RunID != runID {
		return contracts.RunEndedEvent{}, false
	}
	return ended, true
}

// runEndedFromStream reads the events stream for the run's stored io.awaken.run.ended.v1:
// an ordered consumer over the run's events subject, headers only (the type is a header),
// and the one announcement's body once found.
func (c *Client) runEndedFromStream(ctx context.Context, runID string) (contracts.RunEndedEvent, bool, error) {
	cons, err := c.js.OrderedConsumer(ctx, c.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{c.names.EventsSubject(runID)},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		HeadersOnly:       true,
		InactiveThreshold: orderedConsumerIdle,
	})
	if err != nil {
		return contracts.RunEndedEvent{}, false, fmt.Errorf("events consumer: %w", err)
	}
	defer c.deleteOrderedOn(c.names.EventsStream(), cons)
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return contracts.RunEndedEvent{}, false, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if !hasType(m.Headers(), contracts.TypeRunEnded) {
				continue
			}
			md, err := m.Metadata()
			if err != nil {
				return contracts.RunEndedEvent{}, false, err
			}
			stream, err := c.js.Stream(ctx, c.names.EventsStream())
			if err != nil {
				return contracts.RunEndedEvent{}, false, err
			}
			raw, err := stream.GetMsg(ctx, md.Sequence.Stream)
			if err != nil {
				return contracts.RunEndedEvent{}, false, err
			}
			if ended, ok := runEnded(raw.Header, raw.Data, runID); ok {
				return ended, true, nil
			}
		}
		if err := batch.Error(); err != nil {
			return contracts.RunEndedEvent{}, false, err
		}
		if n == 0 {
			return contracts.RunEndedEvent{}, false, nil
		}
	}
}

// hasType reports whether headers name CloudEvent type typ (ce-type, matched without
// regard to case as the CloudEvents NATS binding asks).
func hasType(h map[string][]string, typ string) bool {
	for k, v := range h {
		if strings.EqualFold(k, "ce-type") && len(v) > 0 && v[0] == typ {
			return true
		}
	}
	return false
}

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

// Errors of [Client.ResolveCall].
var (
	// ErrCallNotIndeterminate: the call is not Indeterminate (it runs, waits, or completed);
	// nothing changed.
	ErrCallNotIndeterminate = errors.New("call is not indeterminate")
	// ErrCallAlreadyResolved: another resolution of the call was recorded first; nothing
	// changed.
	ErrCallAlreadyResolved = errors.New("call was resolved already")
	// ErrCallResolvePending: the resolution is stored and will be applied, but it was not
	// seen recorded before ctx ended.
	ErrCallResolvePending = errors.New("call resolution stored, not seen recorded yet")
)

// CallResolveRequest is an operator's resolution of an indeterminate call.
type CallResolveRequest struct {
	// Outcome is ran (Output is the call's output: what the tool did, as the operator
	// found it) or not_run (the model reads the error "tool did not run (resolved by
	// operator): {note}").
	Outcome contracts.ReconcileOutcome `json:"outcome"`
	Output  *contracts.ToolOutput      `json:"output,omitempty"`
	Note    string                     `json:"note,omitempty"`
}

// CallResolveResult says how a resolution was applied.
type CallResolveResult struct {
	OperationID string `json:"operation_id"`
	// Status is resolved (the batch's published results carry the resolved output) or
	// corrected (the batch was published indeterminate; an io.awaken.tool.result.corrected.v1
	// event on the run's results subject carries the resolved output).
	Status  string                     `json:"status"`
	Outcome contracts.ReconcileOutcome `json:"outcome"`
	Output  contracts.ToolOutput       `json:"output"`
	Actor   string                     `json:"actor,omitempty"`
	Role    string                     `json:"role,omitempty"`
	Note    string                     `json:"note,omitempty"`
}

// CallNotIndeterminateError is returned (wrapping [ErrCallNotIndeterminate]) when the call
// is not Indeterminate: Phase says where it is.
type CallNotIndeterminateError struct {
	OperationID string
	Phase       contracts.PhaseKind
}

func (e *CallNotIndeterminateError) Error() string {
	return fmt.Sprintf("call %s is %s, not indeterminate", e.OperationID, e.Phase)
}
func (e *CallNotIndeterminateError) Unwrap() error { return ErrCallNotIndeterminate }

// CallAlreadyResolvedError is returned (wrapping [ErrCallAlreadyResolved]) when another
// resolution was recorded first: Result says which.
type CallAlreadyResolvedError struct{ Result CallResolveResult }

func (e *CallAlreadyResolvedError) Error() string {
	return fmt.Sprintf("call %s was resolved already (%s, by %q)", e.Result.OperationID, e.Result.Status, e.Result.Actor)
}
func (e *CallAlreadyResolvedError) Unwrap() error { return ErrCallAlreadyResolved }

// ResolveCall resolves the indeterminate call op — the operator checked the outside world
// and says what happened — and returns once the resolution is recorded: in the batch's
// results when the batch was not yet finalized, or as a correction published beside them
// when it was. awaken never runs the call again. actor and role are recorded as who
// resolved it (claims: the api's door passes the authenticated actor and its role).
// The request is validated first ([contracts.CallResolve.Validate], wrapping
// [contracts.ErrInvalidResolution]); a call that is not Indeterminate is refused with a
// [*CallNotIndeterminateError], one resolved already with a [*CallAlreadyResolvedError],
// and nothing is published. ctx bounds the wait; when it ends first the error wraps
// [ErrCallResolvePending].
func (c *Client) ResolveCall(ctx context.Context, op string, req CallResolveRequest, actor, role string) (CallResolveResult, error) {
	cmd := contracts.CallResolve{OperationID: op, Outcome: req.Outcome, Output: req.Output, Note: req.Note, Actor: actor, Role: role}
	if err := cmd.Validate(); err != nil {
		return CallResolveResult{}, fmt.Errorf("client: %w", err)
	}
	// Watching first: the revision that records the resolution cannot come unseen.
	w, err := c.watchCall(ctx, op)
	if err != nil {
		return CallResolveResult{}, err
	}
	defer w.stop()
	if err := w.current(ctx); err != nil {
		if ctx.Err() != nil {
			return CallResolveResult{}, fmt.Errorf("client: resolve call %s: %w", op, ctx.Err())
		}
		return CallResolveResult{}, err
	}
	switch last := w.last; {
	case last != nil && last.Resolution != nil:
		return CallResolveResult{}, &CallAlreadyResolvedError{Result: resolveResult(op, last.Resolution)}
	case last == nil:
		return CallResolveResult{}, &CallNotIndeterminateError{OperationID: op, Phase: contracts.PhaseRequested}
	case last.Phase.Kind != contracts.PhaseIndeterminate:
		return CallResolveResult{}, &CallNotIndeterminateError{OperationID: op, Phase: last.Phase.Kind}
	}
	id := "resolve-" + op + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := c.publish(ctx, c.names.CallResolveSubject(), id, contracts.TypeCallResolve, cmd); err != nil {
		return CallResolveResult{}, err
	}
	rec, err := w.follow(ctx, func(rec *contracts.CallRecord) bool { return rec.Resolution != nil })
	switch {
	case err != nil && ctx.Err() != nil:
		return CallResolveResult{OperationID: op}, fmt.Errorf("client: call %s: %w: %w", op, ErrCallResolvePending, context.Cause(ctx))
	case err != nil:
		return CallResolveResult{}, err
	case rec.Resolution.CommandID != id:
		return CallResolveResult{}, &CallAlreadyResolvedError{Result: resolveResult(op, rec.Resolution)}
	}
	res := resolveResult(op, rec.Resolution)
	if res.Status == contracts.ResolutionCorrected {
		// The gate marks the record corrected, then publishes the correction: a caller
		// told "corrected" must find it on the stream.
		run, _, _, _ := contracts.ParseOperationID(op) // valid: the command was
		if err := c.awaitCorrection(ctx, run, op); err != nil {
			return res, fmt.Errorf("client: call %s: %w: %w", op, ErrCallResolvePending, err)
		}
	}
	return res, nil
}

// awaitCorrection waits until the correction of op is stored among run's corrections,
// looking again with a growing pause (bounded by ctx).
func (c *Client) awaitCorrection(ctx context.Context, run, op string) error {
	pause := 20 * time.Millisecond
	for {
		got, err := c.Corrections(ctx, run)
		if err != nil {
			return err
		}
		for _, rc := range got {
			if rc.OperationID == op {
				return nil
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
		pause = min(2*pause, time.Second)
	}
}

// resolveResult describes the resolution res of op.
func resolveResult(op string, res *contracts.CallResolution) CallResolveResult {
	return CallResolveResult{
		OperationID: op, Status: res.Applied, Outcome: res.Outcome, Output: res.Output,
		Actor: res.Actor, Role: res.Role, Note: res.Note,
	}
}

// Corrections returns the corrections of run runID's published results, oldest first:
// the io.awaken.tool.result.corrected.v1 events the gate published on
// [contracts.Names.ResultCorrectionsSubject] for calls an operator resolved after their
// batch was published. The results themselves never change; a platform that keeps a
// transcript shows each correction beside the result it names.
func (c *Client) Corrections(ctx context.Context, runID string) ([]contracts.ResultCorrected, error) {
	if err := contracts.ValidateID("run_id", runID); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	n, err := c.runNames(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("client: corrections: %w", err)
	}
	cons, err := c.js.OrderedConsumer(ctx, n.ResultsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{n.ResultCorrectionsSubject(runID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy, InactiveThreshold: orderedConsumerIdle,
	})
	if err != nil {
		return nil, fmt.Errorf("client: corrections consumer: %w", err)
	}
	defer c.deleteOrderedOn(n.ResultsStream(), cons)
	// The count of corrections the consumer's creation answered. Asking the server again
	// would cost a round trip and a consumer-info grant, which the api user (it resolves
	// calls through this client) does not have.
	info := cons.CachedInfo()
	if info == nil {
		return nil, fmt.Errorf("client: corrections of %s: the consumer was created without its info", runID)
	}
	var out []contracts.ResultCorrected
	for left := int(info.NumPending); left > 0; {
		batch, err := cons.Fetch(left, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("client: corrections of %s: %w", runID, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data())
			if err != nil || ev.Type != contracts.TypeResultCorrected {
				continue
			}
			var rc contracts.ResultCorrected
			if err := json.Unmarshal(ev.Data, &rc); err != nil {
				return nil, fmt.Errorf("client: correction %s: %w", ev.ID, err)
			}
			out = append(out, rc)
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("client: corrections of %s: %w", runID, err)
		}
		if got == 0 {
			return nil, fmt.Errorf("client: corrections of %s: %d announced, none delivered", runID, left)
		}
		left -= got
	}
	return out, nil
}
