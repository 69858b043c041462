package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// probe gates a recorded parallel-delegation batch: every call is decided
// first, in memory — a decision already recorded is reused. Only if every call is allowed
// does any of them enter execution: then each call still Requested is written once,
// decided and moved to what its Allow implies (Executing{1}, or the execution error when
// its pinned policy no longer fits), the decisions are audited, and only then is every
// executor request published, with Parallel set. Otherwise only the new decisions are
// recorded (CallRecord{Requested, Decision}) and audited, and the batch falls back to the
// sequential path at call 0, which applies the recorded decision instead of deciding
// again; the batcher drives the later calls, which reuse theirs. A redelivered probe finds
// the decisions recorded and only re-publishes. Every decision is durable with its audit
// data (outcome, reason, time) in its call record before any executor request goes out;
// the audit copies are published with the requests and the request is acknowledged only
// once all are stored, so a probe that dies in between is redelivered, finds the
// records, and publishes them again.
func (s *Service) probe(ctx context.Context, b *contracts.BatchRecord) error {
	sub := &b.Submission
	n := len(sub.Calls)
	op := s.env.Operation(ServiceName, pipeline.ProbeID(sub.BatchID()))
	var recs []contracts.CallRecord
	var parallel bool
	if err := op.Commit(ctx, func() (committed bool, err error) {
		recs, parallel, committed, err = s.decideAllRaced(ctx, b)
		return committed, err
	}); err != nil {
		return err
	}
	for i := range n {
		// A slot taken for a call that a cancellation sealed first goes back.
		if err := s.giveBackIfEnded(ctx, b, i, recs[i]); err != nil {
			return err
		}
	}
	// The decisions are durable in the call records; their audit copies go out with what
	// they imply, in one round trip for the whole batch when it runs in parallel (every
	// call is allowed, so none parks), and before the fallback's sequential path.
	bd := s.builder(b)
	var c collect
	for i := range n {
		if at, ok := recs[i].MarkTime(contracts.StageProbed); ok && recs[i].Decision != nil {
			c.add(bd.audit(i, recs[i].Decision, at))
		}
	}
	if !parallel {
		if err := c.publish(ctx, s.env.Pub); err != nil {
			return err
		}
		return s.gateCall(ctx, b, 0, false)
	}
	return op.Publish(ctx, func() error {
		for i := range n {
			decisionMessages(bd, b, i, &recs[i], &c)
		}
		if err := c.publish(ctx, s.env.Pub); err != nil {
			return err
		}
		for i := range n {
			if r := &recs[i]; r.SlotWait != "" && r.ExecutingUnentered() && r.Input == nil {
				// Entered waiting for a concurrency slot: look at the ledger again, for a
				// slot handed over before the waiting record was written (slots.go).
				if err := s.admit(ctx, b, i, false); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// decideAllRaced runs [Service.decideAll] until it does not lose a compare-and-swap race,
// at most [maxCASAttempts] times; committed reports whether any attempt wrote.
func (s *Service) decideAllRaced(ctx context.Context, b *contracts.BatchRecord) (recs []contracts.CallRecord, parallel, committed bool, err error) {
	for range maxCASAttempts {
		var wrote bool
		recs, parallel, wrote, err = s.decideAll(ctx, b)
		committed = committed || wrote
		if !errors.Is(err, errRaced) {
			return recs, parallel, committed, err
		}
	}
	return nil, false, committed, fmt.Errorf("gate: probe %s: %d concurrent writers in a row", b.Submission.BatchID(), maxCASAttempts)
}

// decideAll reads every call record of b and decides, in memory, each call that has no
// recorded decision. parallel reports whether every call can run in parallel: it is still
// Requested and its decision is Allow, or it is past Requested with an Allow decision (a
// redelivered probe after dispatch). Then it writes, once per call: when parallel, each
// Requested call with its decision and its entry; otherwise each new decision alone. A
// call the chain answers with client execution or unknown tool is not recorded — those
// answers are not permission decisions and the sequential path derives them again,
// identically. wrote reports whether anything was written; a lost race is [errRaced],
// and the caller starts over from what is committed.
func (s *Service) decideAll(ctx context.Context, b *contracts.BatchRecord) (recs []contracts.CallRecord, parallel, wrote bool, err error) {
	n := len(b.Submission.Calls)
	recs, revs, err := s.loadCalls(ctx, b)
	if err != nil {
		return nil, false, false, err
	}
	decidedNow := make([]bool, n)
	// The calls of one probe are decided together: each tool's pause is read once for all.
	pauses := pauseMemo{}
	parallel = true
	for i := range n {
		rec := &recs[i]
		if rec.Phase.Kind != contracts.PhaseRequested || rec.Decision != nil {
			// Decided by an earlier delivery of this probe, or sealed by a cancellation; a
			// call the sequential path already handled means the batch fell back.
			parallel = parallel && rec.Decision != nil && rec.Decision.IsAllow()
			continue
		}
		d, err := s.decideNow(ctx, b, i, pauses)
		if err != nil {
			return nil, false, false, err
		}
		if d.outcome == nil {
			parallel = false
			continue
		}
		if err := rec.Probe(d.outcome, s.env.Telemetry.TraceParent(ctx), s.env.Now()); err != nil {
			return nil, false, false, bus.Permanent(fmt.Errorf("gate: probe call %s: %w", rec.CallID, err))
		}
		decidedNow[i] = true
		parallel = parallel && d.outcome.IsAllow()
	}
	for i := range n {
		enter := parallel && recs[i].Phase.Kind == contracts.PhaseRequested
		if !enter && !decidedNow[i] {
			continue
		}
		if enter {
			d := decision{outcome: recs[i].Decision}
			if s.takesSlot(b, i, d) {
				if d.slotWait, err = s.limits.Acquire(ctx, b, i); err != nil {
					return nil, false, wrote, err
				}
			}
			if err := s.applyDecision(b, i, &recs[i], d); err != nil {
				return nil, false, wrote, bus.Permanent(err)
			}
			// Its terminal revision, whoever writes it, then advances no sequential
			// dispatch (the batcher reads it off the record).
			recs[i].RunOutsideSequence()
		}
		if _, err := s.putCall(ctx, b, i, recs[i], revs[i]); err != nil {
			return nil, false, wrote, err
		}
		wrote = true
		if decidedNow[i] {
			// Counted once: only the delivery whose write recorded the decision gets here.
			s.env.Telemetry.GateDecision(recs[i].Decision.AuditLabel())
		}
	}
	return recs, parallel, wrote, nil
}
