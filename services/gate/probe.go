package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// probe returns the steps that gate a recorded parallel-delegation batch: every call is
// decided first, here, in memory — a decision already recorded is reused. Only if every
// call is allowed does any of them enter execution: then the commit writes each call
// still Requested once, decided and moved to what its Allow implies (Executing{1}, or the
// execution error when its pinned policy no longer fits), the decisions are audited, and
// only then is every executor request published, with Parallel set. Otherwise only the new
// decisions are recorded (CallRecord{Requested, Decision}), handing the calls to no one,
// and audited, and the batch falls back to the sequential path at call 0, which applies
// the recorded decision instead of deciding again; the batcher drives the later calls,
// which reuse theirs. A redelivered probe finds the decisions recorded and only
// re-publishes. Every decision is durable with its audit data (outcome, reason, time) in
// its call record before any executor request goes out; the audit copies are published
// with the requests and the request is acknowledged only once all are stored, so a probe
// that dies in between is redelivered, finds the records, and publishes them again.
func (s *Service) probe(ctx context.Context, b *contracts.BatchRecord) ([]pipeline.Effect, error) {
	n := len(b.Submission.Calls)
	p, err := s.decideAll(ctx, b)
	if err != nil {
		return nil, err
	}
	// A batch that runs in parallel hands its calls to their executors (or, a call whose
	// pin no longer fits, completed, to the barrier); one that falls back records
	// decisions alone, which hand nothing on.
	var handOffs []pipeline.HandOff
	if p.parallel {
		handOffs = []pipeline.HandOff{pipeline.ToExecutor, pipeline.ToBarrier}
	}
	bd := s.builder(b)
	// The decisions are durable in the call records; their audit copies go out with what
	// they imply, in one round trip for the whole batch when it runs in parallel (every
	// call is allowed, so none parks), and before the fallback's sequential path.
	var c collect
	return []pipeline.Effect{
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			return s.commitProbe(ctx, b, p)
		}, handOffs...),
		pipeline.Do(func(ctx context.Context) error {
			for i := range n {
				// A slot taken for a call that a cancellation sealed first goes back.
				if err := s.giveBackIfEnded(ctx, b, i, p.recs[i]); err != nil {
					return err
				}
			}
			for i := range n {
				if at, ok := p.recs[i].MarkTime(contracts.StageProbed); ok && p.recs[i].Decision != nil {
					c.add(bd.audit(i, p.recs[i].Decision, at))
				}
			}
			return nil
		}),
		pipeline.Do(func(ctx context.Context) error {
			if p.parallel {
				return nil
			}
			if err := c.publish(ctx, s.env.Pub); err != nil {
				return err
			}
			// The fallback: call 0 is gated as on the sequential path, an operation of
			// its own, and the probe has nothing more to publish.
			if err := s.gateCall(ctx, b, 0, false); err != nil {
				return err
			}
			return pipeline.ErrSettled
		}),
		pipeline.Publish(func(ctx context.Context) error {
			for i := range n {
				decisionMessages(bd, b, i, &p.recs[i], &c)
			}
			if err := c.publish(ctx, s.env.Pub); err != nil {
				return err
			}
			for i := range n {
				if r := &p.recs[i]; r.SlotWait != "" && r.ExecutingUnentered() && r.Input == nil {
					// Entered waiting for a concurrency slot: look at the ledger again, for a
					// slot handed over before the waiting record was written (slots.go).
					if err := s.admit(ctx, b, i, false); err != nil {
						return err
					}
				}
			}
			return nil
		}),
	}, nil
}

// probeDecisions is what a probe read and decided: every call's record as read, with the
// decisions made now recorded on it.
type probeDecisions struct {
	recs []contracts.CallRecord
	revs []uint64
	// decidedNow marks the calls decided now, whose records are written with the decision.
	decidedNow []bool
	// parallel: every call can run in parallel (see [Service.decideAll]).
	parallel bool
}

// commitProbe writes the decisions p holds ([Service.writeProbe]), and when it loses a
// compare-and-swap race reads and decides again from what is committed
// ([Service.decideAll]) and writes that, at most [maxCASAttempts] times in all; p then
// holds the last decisions. committed reports whether any attempt wrote.
func (s *Service) commitProbe(ctx context.Context, b *contracts.BatchRecord, p *probeDecisions) (committed bool, err error) {
	for attempt := range maxCASAttempts {
		if attempt > 0 {
			next, err := s.decideAll(ctx, b)
			if err != nil {
				return committed, err
			}
			*p = *next
		}
		wrote, err := s.writeProbe(ctx, b, p)
		committed = committed || wrote
		if !errors.Is(err, errRaced) {
			return committed, err
		}
	}
	return committed, fmt.Errorf("gate: probe %s: %d concurrent writers in a row", b.Submission.BatchID(), maxCASAttempts)
}

// decideAll reads every call record of b and decides, in memory, each call that has no
// recorded decision. parallel reports whether every call can run in parallel: it is still
// Requested and its decision is Allow, or it is past Requested with an Allow decision (a
// redelivered probe after dispatch). A call the chain answers with client execution or
// unknown tool is not recorded — those answers are not permission decisions and the
// sequential path derives them again, identically.
func (s *Service) decideAll(ctx context.Context, b *contracts.BatchRecord) (*probeDecisions, error) {
	n := len(b.Submission.Calls)
	recs, revs, err := s.loadCalls(ctx, b)
	if err != nil {
		return nil, err
	}
	p := &probeDecisions{recs: recs, revs: revs, decidedNow: make([]bool, n), parallel: true}
	// The calls of one probe are decided together: each tool's pause is read once for all.
	pauses := pauseMemo{}
	for i := range n {
		rec := &recs[i]
		if rec.Phase.Kind != contracts.PhaseRequested || rec.Decision != nil {
			// Decided by an earlier delivery of this probe, or sealed by a cancellation; a
			// call the sequential path already handled means the batch fell back.
			p.parallel = p.parallel && rec.Decision != nil && rec.Decision.IsAllow()
			continue
		}
		d, err := s.decideNow(ctx, b, i, pauses)
		if err != nil {
			return nil, err
		}
		if d.outcome == nil {
			p.parallel = false
			continue
		}
		if err := rec.Probe(d.outcome, s.env.Telemetry.TraceParent(ctx), s.env.Now()); err != nil {
			return nil, bus.Permanent(fmt.Errorf("gate: probe call %s: %w", rec.CallID, err))
		}
		p.decidedNow[i] = true
		p.parallel = p.parallel && d.outcome.IsAllow()
	}
	return p, nil
}

// writeProbe writes the decisions of p, once per call: when parallel, each Requested call
// with its decision and its entry; otherwise each new decision alone. wrote reports
// whether anything was written; a lost race is [errRaced], and the caller starts over from
// what is committed.
func (s *Service) writeProbe(ctx context.Context, b *contracts.BatchRecord, p *probeDecisions) (wrote bool, err error) {
	recs := p.recs
	for i := range recs {
		enter := p.parallel && recs[i].Phase.Kind == contracts.PhaseRequested
		if !enter && !p.decidedNow[i] {
			continue
		}
		if enter {
			d := decision{outcome: recs[i].Decision}
			if s.takesSlot(b, i, d) {
				if d.slotWait, err = s.limits.Acquire(ctx, b, i); err != nil {
					return wrote, err
				}
			}
			if err := s.applyDecision(b, i, &recs[i], d); err != nil {
				return wrote, bus.Permanent(err)
			}
			// Its terminal revision, whoever writes it, then advances no sequential
			// dispatch (the batcher reads it off the record).
			recs[i].RunOutsideSequence()
		}
		if _, err := s.putCall(ctx, b, i, recs[i], p.revs[i]); err != nil {
			return wrote, err
		}
		wrote = true
		if p.decidedNow[i] {
			// Counted once: only the delivery whose write recorded the decision gets here.
			s.env.Telemetry.GateDecision(recs[i].Decision.AuditLabel())
		}
	}
	return wrote, nil
}
