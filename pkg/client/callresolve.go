package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

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
