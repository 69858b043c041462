package limits

import (
	"context"
	"fmt"
	"time"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// EndShares ends op's shares, for call i of b, which ran: they are spent, and leave the
// entries' held shares for their used totals. In a budget matching the call whose tool
// reported what the call cost, the share is settled at that amount (the configured cost
// was the reservation, the report is what is spent) and folded in one write, which it
// returns the count of; a share not held (folded by an earlier delivery, a budget added
// since, an earlier block) is left alone, so a redelivered record settles nothing twice.
// Every other share is only noted ended: the next write of its key folds it
// ([Ledger.foldEnded]) — no write of its own, so a call costs the ledger no more writes
// than its decision's.
func (l *Ledger) EndShares(ctx context.Context, b *contracts.BatchRecord, i int, op string, decided *contracts.GateOutcome, cost *float64) (int, error) {
	sub := &b.Submission
	at, err := l.sharesAt(ctx, b, i, op, decided)
	if err != nil {
		return 0, err
	}
	st, err := l.store(ctx)
	if err != nil {
		return 0, err
	}
	settled := 0
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind == contracts.LimitConcurrency || !lim.Matches(sub.Calls[i]) {
			continue
		}
		key := contracts.LimitLedgerKey(lim.Name, lim.KeyValue(sub), lim.WindowStart(at))
		if lim.Kind != contracts.LimitBudget || cost == nil {
			l.noteEnded(key, op)
			continue
		}
		var folded []string
		wrote := false
		_, _, err := st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
			folded, wrote = nil, false
			held, ok := cur.Held[op]
			if !exists || !ok {
				return state.ErrNoChangeOnLeader
			}
			folded = l.foldEnded(key, cur, op)
			delete(cur.Held, op)
			cur.Used += *cost - held
			wrote = true
			return nil
		})
		if err != nil {
			return settled, fmt.Errorf("gate: limit %s: settle %s at its reported cost %v: %w", lim.Name, op, *cost, err)
		}
		l.forgetEnded(key, folded)
		if wrote {
			settled++
			l.env.Telemetry.LimitEvent(lim.Name, limitSettled)
		}
	}
	return settled, nil
}

// ReleaseAll gives back op's share, for call i of b, in every limit matching the call; it
// returns how many it looked at.
func (l *Ledger) ReleaseAll(ctx context.Context, b *contracts.BatchRecord, i int, op string, decided *contracts.GateOutcome) (int, error) {
	sub := &b.Submission
	n := 0
	at, err := l.sharesAt(ctx, b, i, op, decided)
	if err != nil {
		return 0, err
	}
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind == contracts.LimitConcurrency || !lim.Matches(sub.Calls[i]) {
			continue
		}
		key := contracts.LimitLedgerKey(lim.Name, lim.KeyValue(sub), lim.WindowStart(at))
		if err := l.Release(ctx, key, op); err != nil {
			return n, err
		}
		l.env.Telemetry.LimitEvent(lim.Name, limitReleased)
		n++
	}
	return n, nil
}

// sharesAt is the moment whose windows the decision decided took op's shares in (call i of
// b): the batch's recording, or the window a waiting rate limit deferred the call to —
// named by the recorded decision, or, for a decision lost to a seal (decided nil), by the
// deferral pointer in the ledger.
func (l *Ledger) sharesAt(ctx context.Context, b *contracts.BatchRecord, i int, op string, decided *contracts.GateOutcome) (time.Time, error) {
	switch {
	case decided != nil && decided.Until != nil:
		return *decided.Until, nil
	case decided == nil:
		if lim := l.WaitingRate(b.Submission.Calls[i]); lim != nil {
			until, err := l.deferredWindow(ctx, lim, b, op)
			if err != nil || !until.IsZero() {
				return until, err
			}
		}
	}
	return b.CreatedAt, nil
}
