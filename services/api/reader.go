package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Reader reads the durable records the gate, the executors and the publisher write — batch,
// call and ticket records — and turns them into the views the HTTP api, the console and
// `awaken batch show` print. It only reads: nothing it returns can change a record. It is
// safe for concurrent use.
type Reader struct {
	runs    *state.Store[contracts.RunRecord]
	batches *state.Store[contracts.BatchRecord]
	calls   *state.Store[contracts.CallRecord]
	tickets *state.Store[contracts.ResumeTicket]
}

// NewReader returns a reader over the given stores (those of a [pipeline.Env]). A batch
// is read where it lives ([pipeline.ReadBatch]): in its run's record while it is the
// run's current batch, in the batches bucket once it is archived.
func NewReader(runs *state.Store[contracts.RunRecord], batches *state.Store[contracts.BatchRecord], calls *state.Store[contracts.CallRecord], tickets *state.Store[contracts.ResumeTicket]) *Reader {
	return &Reader{runs: runs, batches: batches, calls: calls, tickets: tickets}
}

// OpenReader binds a reader to the buckets of names on js, for tools (the CLI) that have a
// NATS connection but no service environment. The buckets must exist.
func OpenReader(ctx context.Context, js jetstream.JetStream, names contracts.Names) (*Reader, error) {
	open := func(bucket string) (jetstream.KeyValue, error) {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return nil, fmt.Errorf("api: bucket %s: %w", bucket, err)
		}
		return kv, nil
	}
	runs, err := open(names.RunsBucket())
	if err != nil {
		return nil, err
	}
	b, err := open(names.BatchesBucket())
	if err != nil {
		return nil, err
	}
	c, err := open(names.CallsBucket())
	if err != nil {
		return nil, err
	}
	t, err := open(names.TicketsBucket())
	if err != nil {
		return nil, err
	}
	return NewReader(state.NewStore[contracts.RunRecord](runs), state.NewStore[contracts.BatchRecord](b), state.NewStore[contracts.CallRecord](c),
		state.NewStore[contracts.ResumeTicket](t)), nil
}

// BatchView is a batch as operators see it: its identity and phase and, in model order,
// every call with its phase, outcome and timeline.
type BatchView struct {
	BatchID   string               `json:"batch_id"`
	RunID     string               `json:"run_id"`
	ThreadID  string               `json:"thread_id"`
	Step      int64                `json:"step"`
	Phase     contracts.BatchPhase `json:"phase"`
	CreatedAt time.Time            `json:"created_at"`
	// Metadata are the submitting door's labels (the MCP door: session, client, actor).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Terminal counts the calls that are Completed or Indeterminate.
	Terminal int        `json:"terminal"`
	Calls    []CallView `json:"calls"`
}

// CallView is one call of a [BatchView]. Arguments and Output are model- and tool-authored
// content: whoever renders them must escape them (the console uses textContent only).
type CallView struct {
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	ToolID string `json:"tool_id"`
	// OperationID is the call's operation id, the one POST /v1/calls/{operation_id}/cancel
	// takes.
	OperationID string `json:"operation_id"`
	// Arguments are the arguments the call runs with: as submitted, or as an approval
	// edited them (omitted in batch lists).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ProposedArguments are the submitted arguments when an approval edited them.
	ProposedArguments json.RawMessage `json:"proposed_arguments,omitempty"`
	// Edited is set when an approval edited the call's arguments (also in batch lists).
	Edited bool `json:"edited,omitempty"`
	// Phase is Requested, Executing, Awaiting, Completed or Indeterminate. A call whose
	// record does not exist yet (not gated) is Requested with Recorded false.
	Phase    contracts.PhaseKind `json:"phase"`
	Recorded bool                `json:"recorded"`
	// Attempt is the attempt of an Executing call.
	Attempt uint16 `json:"attempt,omitempty"`
	// SlotWait names the host concurrency limit an Executing call waits for a slot of:
	// admitted, but no executor has it yet.
	SlotWait string `json:"slot_wait,omitempty"`
	// Wait is the wait of an Awaiting call.
	Wait *contracts.ToolWait `json:"wait,omitempty"`
	// Outcome is completed or indeterminate once the call is terminal.
	Outcome contracts.Outcome `json:"outcome,omitempty"`
	// IsError is set for a terminal call whose output is an error (indeterminate included).
	IsError bool `json:"is_error,omitempty"`
	// Reason is the reason of an Indeterminate call.
	Reason string `json:"reason,omitempty"`
	// Output is the committed output of a Completed call (omitted in batch lists).
	Output *contracts.ToolOutput `json:"output,omitempty"`
	// Decision is the recorded gate decision kind (allow, block, set_result,
	// require_confirmation, schedule), when the gate decided.
	Decision contracts.GateOutcomeKind `json:"decision,omitempty"`
	// ResolvedBy is the id of the resume command (or timer) that resolved the call's ticket.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// Actor is who resolved the call's ticket (an api token's name, "nats:{user}", a
	// client's actor, or "timer").
	Actor string `json:"actor,omitempty"`
	// ActorClaimed is set when no door authenticated Actor: a resume command on the public
	// subject (a platform, `awaken tickets approve --as`) named it itself. Show it as a
	// claim ("alice (claimed)"), never as the token or user of that name.
	ActorClaimed bool `json:"actor_claimed,omitempty"`
	// Cancel is set when a call cancel ended the call (or is recorded to end it when its
	// batch reaches it): who, why, and how it ended.
	Cancel *contracts.CallCancelMark `json:"cancel,omitempty"`
	// Reconciles audits each reconcile of the call after an executor crash (outcome, how
	// many times the reconcile was asked, last error), oldest first.
	Reconciles []contracts.CallReconcile `json:"reconciles,omitempty"`
	// Resolution is set when an operator resolved the indeterminate call: into the batch's
	// results (applied "resolved") or as a correction of them ("corrected").
	Resolution *contracts.CallResolution `json:"resolution,omitempty"`
	// Timeline lists when each stage of the call was committed, oldest first.
	Timeline []contracts.TimelineMark `json:"timeline"`
}

// ErrBatchNotFound is wrapped when a batch id names no batch record.
var ErrBatchNotFound = errors.New("batch not found")

// Batch returns the full view of batchID (arguments and outputs included).
func (r *Reader) Batch(ctx context.Context, batchID string) (BatchView, error) {
	rec, err := r.batchRecord(ctx, batchID)
	if err != nil {
		return BatchView{}, err
	}
	return r.view(ctx, rec, true)
}

// batchRecord reads the record of batchID: a 400 *Error for a malformed id, a 404 one
// (wrapping [ErrBatchNotFound]) when there is no such batch.
func (r *Reader) batchRecord(ctx context.Context, batchID string) (*contracts.BatchRecord, error) {
	runID, step, err := contracts.ParseBatchID(batchID)
	if err != nil {
		return nil, &Error{Code: CodeInvalidRequest, Message: err.Error(), Status: http.StatusBadRequest, err: err}
	}
	rec, err := pipeline.ReadBatch(ctx, r.runs, r.batches, runID, step, false)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("no batch %s", batchID), Status: http.StatusNotFound,
				err: fmt.Errorf("%w: %s", ErrBatchNotFound, batchID)}
		}
		return nil, fmt.Errorf("api: read batch %s: %w", batchID, err)
	}
	return &rec, nil
}

// BatchQuery selects the batches of [Reader.Batches].
type BatchQuery struct {
	// RunID restricts the list to one run ("" for every run).
	RunID string
	// Limit is the number of most recent batches returned (0 means [DefaultBatchLimit]).
	Limit int
}

// Batch list limits.
const (
	DefaultBatchLimit = 20
	MaxBatchLimit     = 200
	// listParallelism bounds the concurrent call-record reads of a batch list.
	listParallelism = 8
)

// Batches returns the most recent batches (by creation time, newest first), each with the
// phase and timeline of every call but without arguments and outputs, which can be large;
// fetch one batch for those.
//
// It reads every batch record of the selection (the KV bucket has no index by time), so on
// a deployment with a very large batches bucket a RunID filter is much cheaper.
func (r *Reader) Batches(ctx context.Context, q BatchQuery) ([]BatchView, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultBatchLimit
	}
	limit = min(limit, MaxBatchLimit)
	filter := ""
	if q.RunID != "" {
		if err := contracts.ValidateID("run_id", q.RunID); err != nil {
			return nil, &Error{Code: CodeInvalidRequest, Message: err.Error(), Status: http.StatusBadRequest, err: err}
		}
		filter = q.RunID + ".*"
	}
	entries, err := r.batches.List(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("api: list batches: %w", err)
	}
	// The archive holds the finished batches; each run's record its current one (open,
	// or finalized and not archived yet), which the archive's copy, when there is one,
	// supersedes.
	runFilter := ""
	if q.RunID != "" {
		runFilter = contracts.RunKey(q.RunID)
	}
	runs, err := r.runs.List(ctx, runFilter)
	if err != nil {
		return nil, fmt.Errorf("api: list runs: %w", err)
	}
	for _, e := range runs {
		b := e.Value.Batch
		if b == nil {
			continue
		}
		key := contracts.BatchKey(b.Submission.RunID, b.Submission.Step)
		if _, ok := entries[key]; !ok || b.Phase == contracts.BatchPhaseOpen {
			entries[key] = state.Entry[contracts.BatchRecord]{Key: key, Value: *b}
		}
	}
	recs := make([]*contracts.BatchRecord, 0, len(entries))
	for _, e := range entries {
		rec := e.Value
		recs = append(recs, &rec)
	}
	slices.SortFunc(recs, func(a, b *contracts.BatchRecord) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Submission.BatchID(), b.Submission.BatchID())
	})
	if len(recs) > limit {
		recs = recs[:limit]
	}
	out := make([]BatchView, len(recs))
	errs := make([]error, len(recs))
	sem := make(chan struct{}, listParallelism)
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = r.view(ctx, rec, false)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// view joins a batch record with its call records.
func (r *Reader) view(ctx context.Context, b *contracts.BatchRecord, full bool) (BatchView, error) {
	sub := &b.Submission
	entries, err := r.calls.List(ctx, contracts.CallKeysOfBatch(sub.RunID, sub.Step))
	if err != nil {
		return BatchView{}, fmt.Errorf("api: call records of %s: %w", sub.BatchID(), err)
	}
	v := BatchView{
		BatchID: sub.BatchID(), RunID: sub.RunID, ThreadID: sub.ThreadID, Step: sub.Step,
		Phase: b.Phase, CreatedAt: b.CreatedAt, Metadata: sub.Metadata, Calls: make([]CallView, len(sub.Calls)),
	}
	for i, c := range sub.Calls {
		cv := CallView{Index: i, CallID: c.CallID, ToolID: c.ToolID, OperationID: contracts.OperationID(sub.RunID, sub.Step, c.CallID),
			Phase: contracts.PhaseRequested, Timeline: []contracts.TimelineMark{}}
		if full {
			cv.Arguments = c.Arguments
		}
		if e, ok := entries[contracts.CallKeyOf(b, i)]; ok && e.Value.CallID == c.CallID {
			fillCall(&cv, &e.Value, full)
		}
		if cv.Phase == contracts.PhaseCompleted || cv.Phase == contracts.PhaseIndeterminate {
			v.Terminal++
		}
		v.Calls[i] = cv
	}
	return v, nil
}

func fillCall(cv *CallView, rec *contracts.CallRecord, full bool) {
	cv.Recorded = true
	p := rec.Phase
	cv.Phase = p.Kind
	if cv.Phase == "" {
		cv.Phase = contracts.PhaseRequested
	}
	switch p.Kind {
	case contracts.PhaseExecuting:
		cv.Attempt = p.Attempt
		cv.SlotWait = rec.SlotWait
	case contracts.PhaseAwaiting:
		if p.Wait != nil {
			w := *p.Wait
			cv.Wait = &w
		}
	case contracts.PhaseCompleted:
		cv.Outcome = contracts.OutcomeCompleted
		if p.Output != nil {
			cv.IsError = p.Output.IsError
			if full {
				o := *p.Output
				cv.Output = &o
			}
		}
	case contracts.PhaseIndeterminate:
		cv.Outcome = contracts.OutcomeIndeterminate
		cv.IsError = true
		cv.Reason = p.Reason
	}
	if rec.Decision != nil {
		cv.Decision = rec.Decision.Kind
	}
	cv.ResolvedBy, cv.Actor, cv.ActorClaimed = rec.ResolvedBy, rec.ResolvedActor, rec.ResolvedActorClaimed
	cv.Cancel = rec.Cancel
	cv.Resolution = rec.Resolution
	if rec.EditedArguments != nil {
		cv.Edited = true
		if full {
			cv.ProposedArguments, cv.Arguments = cv.Arguments, rec.EditedArguments
		}
	}
	cv.Reconciles = rec.Reconciles
	cv.Timeline = append(cv.Timeline, rec.Timeline...)
}

// Tickets returns every open ticket, oldest first.
func (r *Reader) Tickets(ctx context.Context) ([]contracts.ResumeTicket, error) {
	entries, err := r.tickets.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("api: list tickets: %w", err)
	}
	out := make([]contracts.ResumeTicket, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Value)
	}
	slices.SortFunc(out, func(a, b contracts.ResumeTicket) int {
		if c := a.OpenedAt.Compare(b.OpenedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.CorrelationID, b.CorrelationID)
	})
	return out, nil
}

// correlation is a parsed correlation id "{kind}.{run_id}.{step}.{call_id}"
// (see [contracts.CorrelationID]).
type correlation struct {
	reason contracts.TicketReason
	runID  string
	step   int64
	callID string
}

// parseCorrelation inverts [contracts.CorrelationID]; ok is false for anything the gate
// could not have issued, under which no ticket can ever exist.
func parseCorrelation(corr string) (correlation, bool) {
	reason, runID, step, callID, err := contracts.ParseCorrelationID(corr)
	if err != nil {
		return correlation{}, false
	}
	return correlation{reason: reason, runID: runID, step: step, callID: callID}, true
}

// parkedCall is what the records say of the call a correlation id names, when its ticket
// is gone: the identity a resume command needs, and whether a ticket was ever opened under
// that id.
type parkedCall struct {
	runID, threadID, snapshotID string
	// everParked is true when the call's record shows it parked under the correlation (a
	// recorded wait decision with that id, an Awaiting phase on it, a resolution, or a
	// client-executed call past Requested).
	everParked bool
}

// lookupParked reads the batch and call records a correlation id names. ok is false when
// no batch or no such call exists: then no ticket was ever opened under the id.
func (r *Reader) lookupParked(ctx context.Context, corr string) (parkedCall, bool, error) {
	c, ok := parseCorrelation(corr)
	if !ok {
		return parkedCall{}, false, nil
	}
	b, err := pipeline.ReadBatch(ctx, r.runs, r.batches, c.runID, c.step, false)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return parkedCall{}, false, nil
		}
		return parkedCall{}, false, fmt.Errorf("api: read batch of %s: %w", corr, err)
	}
	sub := &b.Submission
	idx := slices.IndexFunc(sub.Calls, func(tc contracts.ToolCall) bool { return tc.CallID == c.callID })
	if idx < 0 {
		return parkedCall{}, false, nil
	}
	pc := parkedCall{runID: sub.RunID, threadID: sub.ThreadID, snapshotID: sub.Agent.SnapshotID}
	rec, _, err := r.calls.Get(ctx, contracts.CallKeyOf(&b, idx))
	switch {
	case errors.Is(err, state.ErrNotFound):
		return pc, true, nil
	case err != nil:
		return parkedCall{}, false, fmt.Errorf("api: read call of %s: %w", corr, err)
	}
	past := rec.Phase.Kind != "" && rec.Phase.Kind != contracts.PhaseRequested
	switch {
	case rec.ResolvedBy != "":
		pc.everParked = true
	case rec.Phase.Wait != nil && rec.Phase.Wait.CorrelationID == corr:
		pc.everParked = true
	case past && rec.Decision != nil && rec.Decision.IsWait() && rec.Decision.CorrelationID == corr:
		pc.everParked = true
	case past && c.reason == contracts.ReasonClientExecution && idx < len(b.Pinned) &&
		b.Pinned[idx].Kind == contracts.KindClientExecuted:
		pc.everParked = true
	}
	return pc, true, nil
}
