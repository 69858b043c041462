package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// probe handles the gate request of a parallel-delegation batch: every call is decided first — a decision already recorded is reused,
// a new one is recorded as CallRecord{Requested, Decision} — and audited once. Only if
// every call is allowed does any of them enter execution: then each is moved
// Requested → Executing{1} and its executor request is published with Parallel set.
// Otherwise the batch falls back to the sequential path at call 0, which applies the
// recorded decision instead of deciding again; the batcher drives the later calls, which
// reuse theirs. A redelivered probe finds the decisions recorded and only re-publishes.
func (s *Service) probe(ctx context.Context, b *contracts.BatchRecord) error {
	sub := &b.Submission
	n := len(sub.Calls)
	recs := make([]contracts.CallRecord, n)
	revs := make([]uint64, n)
	parallel := true
	committed := false
	for i := range n {
		rec, rev, wrote, ok, err := s.recordDecision(ctx, b, i)
		if err != nil {
			return err
		}
		recs[i], revs[i] = rec, rev
		committed = committed || wrote
		if !ok {
			parallel = false
		}
	}
	if committed {
		if err := s.env.Fault(ctx, ServiceName, pipeline.FaultAfterCommit, pipeline.ProbeID(sub.BatchID())); err != nil {
			return err
		}
	}
	// The audit trail of every decision is durable before any call moves on.
	bd := s.builder(b)
	var c collect
	for i := range n {
		if at, ok := recs[i].MarkTime(contracts.StageProbed); ok && recs[i].Decision != nil {
			c.add(bd.audit(i, recs[i].Decision.AuditLabel(), recs[i].Decision.Reason, at))
		}
	}
	if err := c.publish(ctx, s.env.Pub); err != nil {
		return err
	}
	if !parallel {
		return s.gateCall(ctx, b, 0, false)
	}

	// Every call is allowed: commit each entry, then publish every request.
	committed = false
	for i := range n {
		if recs[i].Phase.Kind != contracts.PhaseRequested {
			continue
		}
		rec, err := s.enterParallel(ctx, b, i, recs[i], revs[i])
		if err != nil {
			return err
		}
		recs[i] = rec
		committed = true
	}
	if committed {
		if err := s.env.Fault(ctx, ServiceName, pipeline.FaultAfterCommit, pipeline.ProbeID(sub.BatchID())); err != nil {
			return err
		}
	}
	for i := range n {
		if err := s.realizeDecision(ctx, b, i, &recs[i], true); err != nil {
			return err
		}
	}
	return s.env.Fault(ctx, ServiceName, pipeline.FaultAfterPublish, pipeline.ProbeID(sub.BatchID()))
}

// recordDecision makes sure call i has its gate decision recorded, deciding it if needed.
// It returns the committed record and revision, whether it wrote, and whether the call can
// run in parallel: it is still Requested and its recorded decision is Allow, or it is past
// Requested already (a redelivered probe after dispatch). A call the chain answers with
// client execution or unknown tool is not recorded here — those answers are not permission
// decisions and the sequential path derives them again, identically.
func (s *Service) recordDecision(ctx context.Context, b *contracts.BatchRecord, i int) (rec contracts.CallRecord, rev uint64, wrote, ok bool, err error) {
	for range maxCASAttempts {
		rec, rev, err = s.loadCall(ctx, b, i)
		if err != nil {
			return rec, rev, false, false, err
		}
		if rec.Phase.Kind != contracts.PhaseRequested {
			// Dispatched by an earlier delivery of this probe, or sealed by a cancellation;
			// a call the sequential path already handled means the batch fell back.
			return rec, rev, false, rec.Decision != nil && rec.Decision.IsAllow(), nil
		}
		if rec.Decision != nil {
			return rec, rev, false, rec.Decision.IsAllow(), nil
		}
		d, err := s.decideNow(ctx, b, i)
		if err != nil {
			return rec, rev, false, false, err
		}
		if d.outcome == nil {
			return rec, rev, false, false, nil
		}
		if err := rec.Probe(d.outcome, s.env.Telemetry.TraceParent(ctx), s.env.Now()); err != nil {
			return rec, rev, false, false, bus.Permanent(fmt.Errorf("gate: probe call %s: %w", rec.CallID, err))
		}
		next, err := s.putCall(ctx, b, i, rec, rev)
		switch {
		case errors.Is(err, errRaced):
			continue
		case err != nil:
			return rec, rev, false, false, err
		}
		s.env.Telemetry.GateDecision(rec.Decision.AuditLabel())
		return rec, next, true, rec.Decision.IsAllow(), nil
	}
	return rec, rev, false, false, fmt.Errorf("gate: probe call %s: %d concurrent writers in a row", b.Submission.Calls[i].CallID, maxCASAttempts)
}

// enterParallel applies the recorded Allow of Requested call i (Executing{1}, or the
// execution error when its pinned policy no longer fits) by compare-and-swap, re-reading on
// a lost race. It returns the committed record.
func (s *Service) enterParallel(ctx context.Context, b *contracts.BatchRecord, i int, rec contracts.CallRecord, rev uint64) (contracts.CallRecord, error) {
	for range maxCASAttempts {
		if rec.Phase.Kind != contracts.PhaseRequested {
			return rec, nil
		}
		if err := s.applyDecision(b, i, &rec, decision{outcome: rec.Decision}); err != nil {
			return rec, bus.Permanent(err)
		}
		_, err := s.putCall(ctx, b, i, rec, rev)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, errRaced) {
			return rec, err
		}
		if rec, rev, err = s.loadCall(ctx, b, i); err != nil {
			return rec, err
		}
	}
	return rec, fmt.Errorf("gate: dispatch call %s: %d concurrent writers in a row", b.Submission.Calls[i].CallID, maxCASAttempts)
}
