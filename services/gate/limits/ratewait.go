package limits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// A rate limit with over: wait does not block a call its window has no room for: the call
// takes its share in the first later window with room (at most
// [contracts.MaxRateWaitWindows] ahead) and is scheduled to that window's start — a
// schedule decision naming the limit, parked on a scheduled_action ticket whose timer
// hands it over then. The deferral is decided once per operation: the window the batch was
// recorded in keeps a pointer (Deferred: op → the window it went to), so a redelivered
// decision finds the same window even if its own has room by then, and nothing is counted
// twice. Every other windowed limit matching the call counts it in the window it runs in.

// WaitingRate returns the first live rate limit with over: wait that matches call, or nil.
func (l *Ledger) WaitingRate(call contracts.ToolCall) *contracts.Limit {
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind == contracts.LimitRate && lim.Over == contracts.LimitOverWait && !lim.Shadow && lim.Matches(call) {
			return lim
		}
	}
	return nil
}

// errWindowFull: the window has no room for the call's share.
var errWindowFull = errors.New("window full")

// ReserveAhead takes op's share of rate limit lim for the calls of b, in the window the
// batch was recorded in or, when it is full, in the first later one with room. It returns
// the start of the window it deferred the call to (zero: not deferred), and blocked when
// none of the windows within reach has room.
func (l *Ledger) ReserveAhead(ctx context.Context, lim *contracts.Limit, b *contracts.BatchRecord, op string) (until time.Time, blocked bool, err error) {
	st, err := l.store(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	value := lim.KeyValue(&b.Submission)
	base := lim.WindowStart(b.CreatedAt)
	// The recorded window: take the share, or find the deferral an earlier delivery made,
	// or record the deferral's search start.
	var deferredTo int64
	outcome := limitCounted
	baseKey := contracts.LimitLedgerKey(lim.Name, value, base)
	var folded []string
	created := false
	_, _, err = st.Update(ctx, baseKey, func(cur *contracts.LimitLedgerEntry, exists bool) error {
		outcome, deferredTo, created, folded = limitCounted, 0, !exists, nil
		if !exists {
			w := base
			*cur = contracts.LimitLedgerEntry{Limit: lim.Name, Kind: lim.Kind, Key: lim.Key, Value: value, Window: &w}
		}
		if _, held := cur.Held[op]; held {
			outcome = limitHeld
			return state.ErrNoChangeOnLeader
		}
		if at, ok := cur.Deferred[op]; ok {
			deferredTo = at
			return state.ErrNoChangeOnLeader
		}
		if cur.Used+1 > lim.Max() {
			return errWindowFull
		}
		folded = l.foldEnded(baseKey, cur, op)
		if cur.Held == nil {
			cur.Held = map[string]float64{}
		}
		cur.Held[op] = 1
		cur.Used++
		return nil
	})
	if err == nil && deferredTo == 0 {
		l.forgetEnded(baseKey, folded)
		if created {
			l.dropPassedWindows(ctx, lim, value)
		}
	}
	switch {
	case err == nil && deferredTo != 0:
		until = time.Unix(deferredTo, 0).UTC()
		if _, err := l.reserve(ctx, lim, contracts.LimitLedgerKey(lim.Name, value, until), value, until, op, 1, true); err != nil {
			return time.Time{}, false, err
		}
		l.env.Telemetry.LimitEvent(lim.Name, limitHeld)
		return until, false, nil
	case err == nil:
		l.env.Telemetry.LimitEvent(lim.Name, outcome)
		return time.Time{}, false, nil
	case !errors.Is(err, errWindowFull):
		return time.Time{}, false, fmt.Errorf("gate: limit %s: reserve %s: %w", lim.Name, op, err)
	}
	// The recorded window is full: the first later window with room takes the share, and
	// the recorded window points at it.
	for n := 1; n <= contracts.MaxRateWaitWindows; n++ {
		w := base.Add(time.Duration(n) * lim.Window)
		outcome, err := l.reserve(ctx, lim, contracts.LimitLedgerKey(lim.Name, value, w), value, w, op, 1, false)
		if err != nil {
			return time.Time{}, false, err
		}
		if outcome == limitBlocked {
			continue
		}
		_, _, err = st.Update(ctx, contracts.LimitLedgerKey(lim.Name, value, base), func(cur *contracts.LimitLedgerEntry, exists bool) error {
			if !exists {
				return fmt.Errorf("window %s vanished", base)
			}
			if at, ok := cur.Deferred[op]; ok && at == w.Unix() {
				return state.ErrNoChange
			}
			if cur.Deferred == nil {
				cur.Deferred = map[string]int64{}
			}
			cur.Deferred[op] = w.Unix()
			return nil
		})
		if err != nil {
			return time.Time{}, false, fmt.Errorf("gate: limit %s: defer %s: %w", lim.Name, op, err)
		}
		l.env.Telemetry.LimitEvent(lim.Name, limitDeferred)
		return w, false, nil
	}
	return time.Time{}, true, nil
}

// deferredWindow returns the window an earlier decision deferred op to under the waiting
// rate limit lim, for the calls of b (zero: none), read from the recorded window's pointer.
func (l *Ledger) deferredWindow(ctx context.Context, lim *contracts.Limit, b *contracts.BatchRecord, op string) (time.Time, error) {
	st, err := l.store(ctx)
	if err != nil {
		return time.Time{}, err
	}
	e, _, err := st.GetFromLeader(ctx, contracts.LimitLedgerKey(lim.Name, lim.KeyValue(&b.Submission), lim.WindowStart(b.CreatedAt)))
	switch {
	case errors.Is(err, state.ErrNotFound):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("gate: limit %s: read the deferral of %s: %w", lim.Name, op, err)
	}
	if at, ok := e.Deferred[op]; ok {
		return time.Unix(at, 0).UTC(), nil
	}
	return time.Time{}, nil
}

// deferOutcome turns the outcome out of a call that rate limit lim deferred to the window
// at until into a schedule: an allowed call is scheduled for until; a scheduled call's due
// time moves to until if that is later (the ticket takes the later of the two). The
// schedule names the limit and carries until, so the due time is exact whenever the ticket
// opens.
func deferOutcome(out contracts.GateOutcome, lim *contracts.Limit, b *contracts.BatchRecord, i int, policyDigest string, until time.Time) contracts.GateOutcome {
	sub := &b.Submission
	if out.Kind == contracts.GateAllow {
		out = contracts.GateOutcome{
			Kind:          contracts.GateSchedule,
			CorrelationID: contracts.CorrelationID(contracts.ReasonScheduledAction, sub.RunID, sub.Step, sub.Calls[i].CallID),
			PolicyDigest:  policyDigest,
			Shadow:        out.Shadow,
		}
	}
	out.Until = &until
	out.Limit = lim.Name
	out.Reason = lim.BlockReason() + "; waits for the window at " + until.Format(time.RFC3339)
	return out
}
