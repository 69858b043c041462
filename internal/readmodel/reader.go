// Package readmodel is what the api and the CLI read and print: the views of batches, calls
// and tickets built from the records the pipeline writes, and their rendering for a
// terminal. It only reads.
package readmodel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
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
	// The partition count is the deployment's, whatever the caller was configured with.
	names, err := bus.DeploymentNames(ctx, js, names)
	if err != nil {
		return nil, fmt.Errorf("readmodel: %w", err)
	}
	runs, err := pipeline.OpenPartitioned[contracts.RunRecord](ctx, js, names, contracts.Names.RunsBucket, pipeline.RunKeyRoute(names))
	if err != nil {
		return nil, fmt.Errorf("readmodel: %w", err)
	}
	batches, err := pipeline.OpenPartitioned[contracts.BatchRecord](ctx, js, names, contracts.Names.BatchesBucket, pipeline.RunKeyRoute(names))
	if err != nil {
		return nil, fmt.Errorf("readmodel: %w", err)
	}
	calls, err := pipeline.OpenPartitioned[contracts.CallRecord](ctx, js, names, contracts.Names.CallsBucket, pipeline.CallKeyRoute(names))
	if err != nil {
		return nil, fmt.Errorf("readmodel: %w", err)
	}
	kv, err := js.KeyValue(ctx, names.TicketsBucket())
	if err != nil {
		return nil, fmt.Errorf("readmodel: bucket %s: %w", names.TicketsBucket(), err)
	}
	return NewReader(runs, batches, calls, state.NewStore[contracts.ResumeTicket](kv)), nil
}

// ErrBatchNotFound is wrapped when a batch id names no batch record.
var ErrBatchNotFound = errors.New("batch not found")

// Batch returns the full view of batchID (arguments and outputs included).
func (r *Reader) Batch(ctx context.Context, batchID string) (httpapi.BatchView, error) {
	rec, err := r.BatchRecord(ctx, batchID)
	if err != nil {
		return httpapi.BatchView{}, err
	}
	return r.view(ctx, rec, true)
}

// BatchRecord reads the record of batchID: a 400 *httpapi.Error for a malformed id, a 404 one
// (wrapping [ErrBatchNotFound]) when there is no such batch.
func (r *Reader) BatchRecord(ctx context.Context, batchID string) (*contracts.BatchRecord, error) {
	runID, step, err := contracts.ParseBatchID(batchID)
	if err != nil {
		return nil, &httpapi.Error{Code: httpapi.CodeInvalidRequest, Message: err.Error(), Status: http.StatusBadRequest, Err: err}
	}
	rec, err := pipeline.ReadBatch(ctx, r.runs, r.batches, runID, step, false)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return nil, &httpapi.Error{Code: httpapi.CodeNotFound, Message: fmt.Sprintf("no batch %s", batchID), Status: http.StatusNotFound,
				Err: fmt.Errorf("%w: %s", ErrBatchNotFound, batchID)}
		}
		return nil, fmt.Errorf("readmodel: read batch %s: %w", batchID, err)
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
func (r *Reader) Batches(ctx context.Context, q BatchQuery) ([]httpapi.BatchView, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultBatchLimit
	}
	limit = min(limit, MaxBatchLimit)
	filter := ""
	if q.RunID != "" {
		if err := contracts.ValidateID("run_id", q.RunID); err != nil {
			return nil, &httpapi.Error{Code: httpapi.CodeInvalidRequest, Message: err.Error(), Status: http.StatusBadRequest, Err: err}
		}
		filter = q.RunID + ".*"
	}
	entries, err := r.batches.List(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("readmodel: list batches: %w", err)
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
		return nil, fmt.Errorf("readmodel: list runs: %w", err)
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
	out := make([]httpapi.BatchView, len(recs))
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
func (r *Reader) view(ctx context.Context, b *contracts.BatchRecord, full bool) (httpapi.BatchView, error) {
	sub := &b.Submission
	entries, err := r.calls.List(ctx, contracts.CallKeysOfBatch(sub.RunID, sub.Step))
	if err != nil {
		return httpapi.BatchView{}, fmt.Errorf("readmodel: call records of %s: %w", sub.BatchID(), err)
	}
	v := httpapi.BatchView{
		BatchID: sub.BatchID(), RunID: sub.RunID, ThreadID: sub.ThreadID, Step: sub.Step,
		Phase: b.Phase, CreatedAt: b.CreatedAt, Metadata: sub.Metadata, Calls: make([]httpapi.CallView, len(sub.Calls)),
	}
	for i, c := range sub.Calls {
		cv := httpapi.CallView{Index: i, CallID: c.CallID, ToolID: c.ToolID, OperationID: contracts.OperationID(sub.RunID, sub.Step, c.CallID),
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

func fillCall(cv *httpapi.CallView, rec *contracts.CallRecord, full bool) {
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
		return nil, fmt.Errorf("readmodel: list tickets: %w", err)
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

// ParkedCall is what the records say of the call a correlation id names, when its ticket
// is gone: the identity a resume command needs, and whether a ticket was ever opened under
// that id.
type ParkedCall struct {
	RunID, ThreadID, SnapshotID string
	// EverParked is true when the call's record shows it parked under the correlation (a
	// recorded wait decision with that id, an Awaiting phase on it, a resolution, or a
	// client-executed call past Requested).
	EverParked bool
}

// LookupParked reads the batch and call records a correlation id names. ok is false when
// no batch or no such call exists: then no ticket was ever opened under the id.
func (r *Reader) LookupParked(ctx context.Context, corr string) (ParkedCall, bool, error) {
	c, ok := parseCorrelation(corr)
	if !ok {
		return ParkedCall{}, false, nil
	}
	b, err := pipeline.ReadBatch(ctx, r.runs, r.batches, c.runID, c.step, false)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return ParkedCall{}, false, nil
		}
		return ParkedCall{}, false, fmt.Errorf("readmodel: read batch of %s: %w", corr, err)
	}
	sub := &b.Submission
	idx := slices.IndexFunc(sub.Calls, func(tc contracts.ToolCall) bool { return tc.CallID == c.callID })
	if idx < 0 {
		return ParkedCall{}, false, nil
	}
	pc := ParkedCall{RunID: sub.RunID, ThreadID: sub.ThreadID, SnapshotID: sub.Agent.SnapshotID}
	rec, _, err := r.calls.Get(ctx, contracts.CallKeyOf(&b, idx))
	switch {
	case errors.Is(err, state.ErrNotFound):
		return pc, true, nil
	case err != nil:
		return ParkedCall{}, false, fmt.Errorf("readmodel: read call of %s: %w", corr, err)
	}
	past := rec.Phase.Kind != "" && rec.Phase.Kind != contracts.PhaseRequested
	switch {
	case rec.ResolvedBy != "":
		pc.EverParked = true
	case rec.Phase.Wait != nil && rec.Phase.Wait.CorrelationID == corr:
		pc.EverParked = true
	case past && rec.Decision != nil && rec.Decision.IsWait() && rec.Decision.CorrelationID == corr:
		pc.EverParked = true
	case past && c.reason == contracts.ReasonClientExecution && idx < len(b.Pinned) &&
		b.Pinned[idx].Kind == contracts.KindClientExecuted:
		pc.EverParked = true
	}
	return pc, true, nil
}
