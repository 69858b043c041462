package limits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Concurrency limits hold a slot for every call of their tools from the moment the gate
// hands the call to its executor until the call ends, in the same ledger entries as the
// shares of the other kinds (one per limit and key value, no window): [Ledger.Acquire]
// takes a call's slots before its record is handed over, or queues it; [Ledger.ReleaseSlots]
// gives them back when the call ends and passes each, in the same compare-and-swap, to the
// first waiter, remembering the hand-off until that waiter ends. The gate does the record
// writes around them (services/gate slots.go). Slots are acquired in configuration order
// and held while the call waits for a later limit's, so no two calls wait for each other;
// each step is keyed by the operation id, so a redelivered or replayed step finds its slot
// held, or its place in the queue, and takes nothing twice.

// Outcomes of a concurrency limit, the outcome label of awaken_limit_events_total.
const (
	slotTaken  = "slot_taken"  // a free slot was taken
	slotQueued = "slot_queued" // no slot was free: the call waits in order
	slotHanded = "slot_handed" // a slot given back went to the first waiter
	slotFreed  = "slot_freed"  // a slot given back went to no one (nobody waited)
)

// errNoSlot: the ledger entry has no free slot; the call was queued.
var errNoSlot = errors.New("no free slot")

// HasSlots reports whether a concurrency limit applies to the call: only then does its
// hand-over touch the ledger.
func (l *Ledger) HasSlots(call contracts.ToolCall) bool {
	return l.anyConcurrency(func(lim *contracts.Limit) bool { return lim.Matches(call) })
}

// SlotsForTool reports whether a concurrency limit names toolID, whatever the arguments:
// the terminal records of its calls may give slots back.
func (l *Ledger) SlotsForTool(toolID string) bool {
	return l.anyConcurrency(func(lim *contracts.Limit) bool { return lim.MatchesTool(toolID) })
}

func (l *Ledger) anyConcurrency(matches func(*contracts.Limit) bool) bool {
	if l == nil {
		return false
	}
	for k := range l.limits {
		if lim := &l.limits[k]; lim.Kind == contracts.LimitConcurrency && matches(lim) {
			return true
		}
	}
	return false
}

// Waiter is where the record of call i of b is.
func Waiter(b *contracts.BatchRecord, i int) contracts.LimitWaiter {
	sub := &b.Submission
	return contracts.LimitWaiter{Op: callOp(b, i), RunID: sub.RunID, Step: sub.Step, Index: i}
}

// slotKey is the ledger key of lim's slots for the calls of b (no window).
func slotKey(lim *contracts.Limit, b *contracts.BatchRecord) (key, value string) {
	value = lim.KeyValue(&b.Submission)
	return contracts.LimitLedgerKey(lim.Name, value, time.Time{}), value
}

// Acquire takes, in configuration order, a slot of every concurrency limit matching call
// i of b. It returns "" when the call holds all of them, or the name of the first limit
// with no free slot, in whose queue the call now waits (holding the earlier limits' slots).
func (l *Ledger) Acquire(ctx context.Context, b *contracts.BatchRecord, i int) (string, error) {
	if !l.HasSlots(b.Submission.Calls[i]) {
		return "", nil
	}
	st, err := l.store(ctx)
	if err != nil {
		return "", err
	}
	w := Waiter(b, i)
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind != contracts.LimitConcurrency || !lim.Matches(b.Submission.Calls[i]) {
			continue
		}
		key, value := slotKey(lim, b)
		outcome := slotTaken
		_, _, err := st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
			outcome = slotTaken
			if !exists {
				*cur = contracts.LimitLedgerEntry{Limit: lim.Name, Kind: lim.Kind, Key: lim.Key, Value: value}
			}
			if _, held := cur.Held[w.Op]; held {
				outcome = limitHeld
				return state.ErrNoChangeOnLeader
			}
			queued := cur.WaitingIndex(w.Op)
			if cur.Used+1 > lim.Max() {
				outcome = slotQueued
				if queued >= 0 {
					// Waiting already. Update confirms a refusal on the leader's value: a
					// writer that looks again after writing its waiting record must see a
					// hand-off made meanwhile, not a replica's older queue.
					return errNoSlot
				}
				cur.Waiting = append(cur.Waiting, w)
				return nil
			}
			if queued >= 0 {
				cur.Waiting = append(cur.Waiting[:queued:queued], cur.Waiting[queued+1:]...)
			}
			if cur.Held == nil {
				cur.Held = map[string]float64{}
			}
			cur.Held[w.Op] = 1
			cur.Used++
			return nil
		})
		switch {
		case errors.Is(err, errNoSlot): // still queued
		case err != nil:
			return "", fmt.Errorf("gate: limit %s: take a slot for %s: %w", lim.Name, w.Op, err)
		}
		if outcome != limitHeld {
			l.env.Telemetry.LimitEvent(lim.Name, outcome)
		}
		if outcome == slotQueued {
			return lim.Name, nil
		}
	}
	return "", nil
}

// ReleaseSlots gives back op's slot (call i of b, now terminal) in every concurrency limit
// matching the call, and takes it out of any queue. A slot given back goes, in the same
// write, to the first waiter, and the hand-off is remembered until that waiter ends. It
// returns the waiters op handed a slot to — now or on an earlier delivery — whose calls
// the caller must hand over.
func (l *Ledger) ReleaseSlots(ctx context.Context, b *contracts.BatchRecord, i int) ([]contracts.LimitWaiter, error) {
	if !l.HasSlots(b.Submission.Calls[i]) {
		return nil, nil
	}
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	op := Waiter(b, i).Op
	var granted []contracts.LimitWaiter
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind != contracts.LimitConcurrency || !lim.Matches(b.Submission.Calls[i]) {
			continue
		}
		key, _ := slotKey(lim, b)
		var handed *contracts.LimitWaiter
		outcome := ""
		_, _, err := st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
			handed, outcome = nil, ""
			if !exists {
				return state.ErrNoChangeOnLeader
			}
			changed := false
			// op ended, so a hand-off to op is done with: forget it.
			for from, to := range cur.Handed {
				if to.Op == op {
					delete(cur.Handed, from)
					changed = true
				}
			}
			if q := cur.WaitingIndex(op); q >= 0 {
				cur.Waiting = append(cur.Waiting[:q:q], cur.Waiting[q+1:]...)
				changed = true
			}
			if amount, held := cur.Held[op]; held {
				delete(cur.Held, op)
				cur.Used -= amount
				changed = true
				outcome = slotFreed
				if len(cur.Waiting) > 0 && cur.Used+1 <= lim.Max() {
					next := cur.Waiting[0]
					cur.Waiting = cur.Waiting[1:]
					cur.Held[next.Op] = 1
					cur.Used++
					if cur.Handed == nil {
						cur.Handed = map[string]contracts.LimitWaiter{}
					}
					cur.Handed[op] = next
					outcome = slotHanded
				}
			}
			if h, ok := cur.Handed[op]; ok {
				handed = &h // now, or by a delivery that crashed before handing the call over
			}
			if !changed {
				return state.ErrNoChangeOnLeader
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("gate: limit %s: give back the slot of %s: %w", lim.Name, op, err)
		}
		if outcome != "" {
			l.env.Telemetry.LimitEvent(lim.Name, outcome)
		}
		if handed != nil {
			granted = append(granted, *handed)
		}
	}
	return granted, nil
}
