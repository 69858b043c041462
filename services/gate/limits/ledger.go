// Package limits is the gate's limits ledger: the host policy's limits (count, rate,
// budget, concurrency) accounted by compare-and-swap in the limits bucket, one entry per
// limit, key value and window. The gate's dispatch asks it at a decision ([Ledger.Apply]),
// at a hand-over ([Ledger.Acquire]) and at a call's end ([Ledger.ReleaseSlots],
// [Ledger.EndShares], [Ledger.ReleaseAll]), and hands over the calls its answers name;
// the ledger writes nothing but ledger entries and reads nothing but the ledger, so it
// never imports the gate.
package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// FaultAfterReserve fires after a limit's ledger write reserved a call's share and
// before the decision that counts on it is recorded: a crash there leaves the reservation
// without a decision, which the redelivered request finds held and does not count again.
const FaultAfterReserve pipeline.FaultPoint = "after-limit-reserve"

// Outcomes of one limit's evaluation, the outcome label of awaken_limit_events_total.
const (
	limitCounted = "counted" // the call's share was reserved now
	limitHeld    = "held"    // the share was reserved by an earlier delivery of this decision
	limitBlocked = "blocked" // the call was over the limit and blocked
	limitAsked   = "asked"   // the call was over a budget with over: ask, and asks
	limitWould   = "would"   // a shadow limit the call was over: recorded, nothing changed
	// limitSettled: a budget share set to the cost the tool reported for its call.
	limitSettled = "settled"
	// limitDeferred: a waiting rate limit scheduled the call for a later window.
	limitDeferred = "deferred"
	// limitReleased: a call that ended without running had its share looked up to give back.
	limitReleased = "released"
)

// errOverLimit: the ledger entry has no room for the call's share.
var errOverLimit = errors.New("over the limit")

// Ledger accounts the host policy's limits in the limits ledger. It is nil-safe: a gate
// whose host policy has no limits has a nil Ledger and writes nothing for them.
type Ledger struct {
	env    Deps
	limits []contracts.Limit

	once   sync.Once
	ledger *state.Store[contracts.LimitLedgerEntry]
	err    error

	// ended notes the calls that ran and ended whose shares are still held: the next
	// write of their key folds them into used ([Ledger.foldEnded]).
	ended endedNotes
}

// endedNotes remembers, by ledger key, the operations whose calls ran and ended and whose
// shares are still held there, so an entry holds the calls still in flight — not every
// call it ever counted — without a ledger write of its own at each call's end. A note lost
// (a restart, an eviction) leaves its share held, which costs the entry's size, never its
// sum. The notes live in two generations: when the newer holds maxEndedNotes/2, the older
// is dropped and the newer takes its place, so the notes of keys no decision writes again
// (the last call of a run that stops submitting) age out instead of filling the memory.
type endedNotes struct {
	mu   sync.Mutex
	gens [2]map[string]map[string]struct{} // [0] the newer generation, [1] the older
	n    int                               // the notes in gens[0]
}

// maxEndedNotes bounds the operations [endedNotes] remembers.
const maxEndedNotes = 1 << 16

// New returns the ledger of host's limits on env, nil when host has none.
func New(env Deps, host *contracts.Policy) *Ledger {
	if len(host.Limits()) == 0 {
		return nil
	}
	return &Ledger{env: env, limits: host.Limits()}
}

// store opens the ledger bucket once; a missing bucket (a deployment set up before limits
// existed) is an error at every decision a limit applies to, so limits fail closed.
func (l *Ledger) store(ctx context.Context) (*state.Store[contracts.LimitLedgerEntry], error) {
	l.once.Do(func() {
		ledger, err := l.env.LimitsLedger(ctx)
		if err != nil {
			l.err = fmt.Errorf("gate: limits ledger %s (run awaken setup): %w", l.env.Names.LimitsBucket(), err)
			if !errors.Is(err, jetstream.ErrBucketNotFound) {
				// A transient failure is retried at the next decision.
				l.once = sync.Once{}
			}
			return
		}
		l.ledger = ledger
	})
	if l.ledger == nil {
		return nil, l.err
	}
	return l.ledger, nil
}

// Limits returns the host limits the ledger accounts, in configuration order (none for a
// nil ledger). The caller must not change them.
func (l *Ledger) Limits() []contracts.Limit {
	if l == nil {
		return nil
	}
	return l.limits
}

// callOp is the operation id of call i of b.
func callOp(b *contracts.BatchRecord, i int) string {
	sub := &b.Submission
	return contracts.OperationID(sub.RunID, sub.Step, sub.Calls[i].CallID)
}

// KeyedBy reports whether a host limit is keyed by key (contracts.LimitKeyRun, …).
func (l *Ledger) KeyedBy(key string) bool {
	if l == nil {
		return false
	}
	for k := range l.limits {
		if l.limits[k].Key == key {
			return true
		}
	}
	return false
}

// Counting reports whether a limit other than a concurrency limit names toolID, whatever
// the arguments: the shares of its calls that ran end with them ([Ledger.EndShares]).
func (l *Ledger) Counting(toolID string) bool {
	if l == nil {
		return false
	}
	for k := range l.limits {
		if lim := &l.limits[k]; lim.Kind != contracts.LimitConcurrency && lim.MatchesTool(toolID) {
			return true
		}
	}
	return false
}

// MatchesAny reports whether a limit, of any kind, matches call.
func (l *Ledger) MatchesAny(call contracts.ToolCall) bool {
	if l == nil {
		return false
	}
	for k := range l.limits {
		if l.limits[k].Matches(call) {
			return true
		}
	}
	return false
}

// Counts reports whether a call decided o takes a share of the limits: one that may run
// (allow, ask, schedule). A blocked call or one answered with a fixed result runs no tool.
func Counts(o *contracts.GateOutcome) bool {
	switch o.Kind {
	case contracts.GateAllow, contracts.GateRequireConfirmation, contracts.GateSchedule:
		return true
	}
	return false
}

// Apply runs the host limits over the chain's outcome o for call i of b and returns the
// outcome to record. For each limit matching the call, in configuration order:
//   - a live limit reserves the call's share (1, or the tool's cost for a budget) in its
//     ledger entry; a call over it is blocked with the limit's reason, and the shares
//     this decision reserved in earlier limits are given back; a budget with over: ask
//     reserves the overrun and makes the call ask;
//   - a shadow limit reserves in its own entries and, when the call is over it, adds a
//     finding (would: deny or ask) to the outcome; it changes nothing else.
//
// Every reservation is keyed by the call's operation id, so a redelivered or replayed
// decision finds its share held and counts nothing again. The window of a rate or
// windowed budget is the one the batch was recorded in (its record's created_at), which
// every delivery of the decision sees alike.
func (l *Ledger) Apply(ctx context.Context, b *contracts.BatchRecord, i int, o *contracts.GateOutcome) (*contracts.GateOutcome, error) {
	if l == nil || o == nil || !Counts(o) {
		return o, nil
	}
	sub := &b.Submission
	call := sub.Calls[i]
	op := contracts.OperationID(sub.RunID, sub.Step, call.CallID)
	var reserved []string // the live ledger keys this decision reserved in
	out := *o
	// The windows are those of the moment the call may run: the batch's recording, or the
	// window a waiting rate limit defers it to (ratewait.go), taken first. A call that asks
	// is not deferred (a human's answer cannot wait for a window): over a waiting rate, it
	// is blocked like over any rate.
	at := b.CreatedAt
	waiting := l.WaitingRate(call)
	if out.Kind == contracts.GateRequireConfirmation {
		waiting = nil
	}
	if waiting != nil {
		var until time.Time
		var blocked bool
		if err := l.reserveStep(ctx, op, func(ctx context.Context) (reached bool, err error) {
			until, blocked, err = l.ReserveAhead(ctx, waiting, b, op)
			return !blocked, err
		}); err != nil {
			return nil, err
		}
		if blocked {
			return l.block(ctx, waiting, op, nil, fmt.Sprintf("%s; the next %d windows are full", waiting.BlockReason(), contracts.MaxRateWaitWindows))
		}
		window := waiting.WindowStart(b.CreatedAt)
		if !until.IsZero() {
			at, window = until, until
			out = deferOutcome(out, waiting, b, i, contracts.PolicyDigest(l.env.Config.Policy, sub.Policy), until)
		}
		reserved = append(reserved, contracts.LimitLedgerKey(waiting.Name, waiting.KeyValue(sub), window))
	}
	for k := range l.limits {
		lim := &l.limits[k]
		if lim == waiting || lim.Kind == contracts.LimitConcurrency || !lim.Matches(call) {
			continue // a concurrency slot is taken at the hand-over, not the decision (slots.go)
		}
		amount := 1.0
		if lim.Kind == contracts.LimitBudget {
			cost, ok := l.env.Config.ToolCost(call.ToolID)
			if !ok {
				// A tool without a cost (an MCP tool the configuration does not list) cannot
				// be charged: the budget fails closed.
				if lim.Shadow {
					out.Shadow = append(out.Shadow, limitFinding(lim, contracts.AuditDecisionDeny, lim.BlockReason()+"; tool "+call.ToolID+" has no cost"))
					continue
				}
				return l.block(ctx, lim, op, reserved, lim.BlockReason()+"; tool "+call.ToolID+" has no cost")
			}
			amount = cost
		}
		value, window := lim.KeyValue(sub), lim.WindowStart(at)
		key := contracts.LimitLedgerKey(lim.Name, value, window)
		force := lim.Over == contracts.LimitOverAsk && !lim.Shadow
		var outcome string
		if err := l.reserveStep(ctx, op, func(ctx context.Context) (_ bool, err error) {
			outcome, err = l.reserve(ctx, lim, key, value, window, op, amount, force)
			return true, err
		}); err != nil {
			return nil, err
		}
		switch {
		case lim.Shadow && outcome == limitBlocked:
			would := contracts.AuditDecisionDeny
			if lim.Over == contracts.LimitOverAsk {
				would = contracts.AuditDecisionAsk
			}
			out.Shadow = append(out.Shadow, limitFinding(lim, would, lim.BlockReason()))
			l.env.Telemetry.LimitEvent(lim.Name, limitWould)
		case outcome == limitBlocked:
			return l.block(ctx, lim, op, reserved, lim.BlockReason())
		case outcome == limitAsked && out.Until != nil:
			// Deferred to a later rate window: an approval would run it at once, before
			// its window, so over a budget that asks it is blocked instead.
			return l.block(ctx, lim, op, append(reserved, key), lim.BlockReason())
		case outcome == limitAsked:
			reserved = append(reserved, key)
			l.env.Telemetry.LimitEvent(lim.Name, limitAsked)
			if out.Kind != contracts.GateRequireConfirmation {
				out = contracts.GateOutcome{
					Kind:          contracts.GateRequireConfirmation,
					CorrelationID: contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, call.CallID),
					PolicyDigest:  contracts.PolicyDigest(l.env.Config.Policy, sub.Policy),
					Shadow:        out.Shadow,
				}
			}
			out.Limit = lim.Name
		default:
			if !lim.Shadow {
				reserved = append(reserved, key)
			}
			l.env.Telemetry.LimitEvent(lim.Name, outcome)
		}
	}
	return &out, nil
}

// reserveStep runs reserve, one ledger write of the decision of operation op, as a
// sub-operation of op's own that the effects runtime runs: each is a step followed by
// [FaultAfterReserve] when it reached it, so a crash there leaves the share reserved and
// the decision that counts on it unrecorded.
func (l *Ledger) reserveStep(ctx context.Context, op string, reserve func(ctx context.Context) (reached bool, err error)) error {
	return l.env.Apply(ctx, contracts.ServiceGate, pipeline.Effects{Op: op, Steps: []pipeline.Effect{
		pipeline.Step(FaultAfterReserve, reserve),
	}})
}

// block is the outcome of a call over live limit lim: its share in the limits before is
// given back (it never runs), and it completes with lim's reason.
func (l *Ledger) block(ctx context.Context, lim *contracts.Limit, op string, reserved []string, reason string) (*contracts.GateOutcome, error) {
	for _, key := range reserved {
		if err := l.Release(ctx, key, op); err != nil {
			return nil, err
		}
	}
	l.env.Telemetry.LimitEvent(lim.Name, limitBlocked)
	return &contracts.GateOutcome{Kind: contracts.GateBlock, Reason: reason, Limit: lim.Name}, nil
}

// limitFinding is the shadow finding of a shadow limit the call was over.
func limitFinding(lim *contracts.Limit, would, reason string) contracts.ShadowFinding {
	return contracts.ShadowFinding{Policy: contracts.ShadowPolicyHost, Rule: "limit:" + lim.Name, Index: lim.Index,
		Would: would, Reason: reason, Limit: lim.Name}
}

// reserve takes amount for op in ledger entry key of lim by compare-and-swap. It answers
// limitHeld when op holds a share already (a redelivery), limitCounted when it took one,
// limitBlocked when the entry has no room (confirmed on the stream leader's value), and
// limitAsked when it had no room but force took the share anyway (a budget's overrun the
// ask will put to a human).
func (l *Ledger) reserve(ctx context.Context, lim *contracts.Limit, key, value string, window time.Time,
	op string, amount float64, force bool) (string, error) {
	st, err := l.store(ctx)
	if err != nil {
		return "", err
	}
	outcome := limitCounted
	var folded []string
	created := false
	_, _, err = st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
		outcome, created, folded = limitCounted, !exists, nil
		if !exists {
			*cur = contracts.LimitLedgerEntry{Limit: lim.Name, Kind: lim.Kind, Key: lim.Key, Value: value}
			if !window.IsZero() {
				cur.Window = &window
			}
		}
		if _, held := cur.Held[op]; held {
			outcome = limitHeld
			return state.ErrNoChange
		}
		folded = l.foldEnded(key, cur, op)
		if cur.Used+amount > lim.Max() {
			if !force {
				return errOverLimit
			}
			outcome = limitAsked
		}
		if cur.Held == nil {
			cur.Held = map[string]float64{}
		}
		cur.Held[op] = amount
		cur.Used += amount
		return nil
	})
	switch {
	case errors.Is(err, errOverLimit):
		return limitBlocked, nil
	case err != nil:
		return "", fmt.Errorf("gate: limit %s: reserve %s: %w", lim.Name, op, err)
	}
	l.forgetEnded(key, folded)
	if created && !window.IsZero() {
		l.dropPassedWindows(ctx, lim, value)
	}
	return outcome, nil
}

// noteEnded notes that op, whose call ran and ended, holds a share in ledger key that the
// key's next write may fold into used: nothing can give it back or change it any more.
func (l *Ledger) noteEnded(key, op string) {
	e := &l.ended
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n >= maxEndedNotes/2 {
		e.gens[1], e.gens[0], e.n = e.gens[0], nil, 0
	}
	if e.gens[0] == nil {
		e.gens[0] = map[string]map[string]struct{}{}
	}
	ops := e.gens[0][key]
	if ops == nil {
		ops = map[string]struct{}{}
		e.gens[0][key] = ops
	}
	if _, ok := ops[op]; !ok {
		ops[op] = struct{}{}
		e.n++
	}
}

// foldEnded takes the shares of the operations noted ended in key out of cur's held
// shares — their amounts stay in used — and returns the operations it looked at, to
// forget once the write that folds them is made. The operation writing (self) is left
// alone: a decision that finds its own operation held counts nothing again.
func (l *Ledger) foldEnded(key string, cur *contracts.LimitLedgerEntry, self string) []string {
	e := &l.ended
	e.mu.Lock()
	defer e.mu.Unlock()
	var folded []string
	for _, gen := range e.gens {
		for op := range gen[key] {
			if op == self {
				continue
			}
			delete(cur.Held, op)
			folded = append(folded, op)
		}
	}
	return folded
}

// forgetEnded drops the notes of ops in key: a write folded their shares.
func (l *Ledger) forgetEnded(key string, ops []string) {
	if len(ops) == 0 {
		return
	}
	e := &l.ended
	e.mu.Lock()
	defer e.mu.Unlock()
	for g, gen := range e.gens {
		notes := gen[key]
		for _, op := range ops {
			if _, ok := notes[op]; ok {
				delete(notes, op)
				if g == 0 {
					e.n--
				}
			}
		}
		if notes != nil && len(notes) == 0 {
			delete(gen, key)
		}
	}
}

// ForgetKey drops every note of key, which was deleted.
func (l *Ledger) ForgetKey(key string) {
	e := &l.ended
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n -= len(e.gens[0][key])
	delete(e.gens[0], key)
	delete(e.gens[1], key)
}

// windowKept is how long after its start the key of one of lim's windows is kept: the
// window itself, and for a waiting rate the windows it may defer calls to as well, since
// its entry points at where each deferred call went (Deferred) until they have run.
func windowKept(lim *contracts.Limit) time.Duration {
	if lim.Kind == contracts.LimitRate && lim.Over == contracts.LimitOverWait {
		return time.Duration(1+contracts.MaxRateWaitWindows) * lim.Window
	}
	return lim.Window
}

// dropPassedWindows deletes the keys of lim's windows for value that have passed (see
// [windowKept]). It runs when a decision opens a new window of the value — once a window,
// not at every decision — so the keys of a limit's key value are the live windows, not
// every window it ever counted in. A key written since it was listed is kept (the delete
// is conditional on the revision listed); a failure is logged, and the next window tries
// again.
func (l *Ledger) dropPassedWindows(ctx context.Context, lim *contracts.Limit, value string) {
	st, err := l.store(ctx)
	if err != nil {
		return
	}
	log := zerolog.Ctx(ctx)
	entries, err := st.List(ctx, contracts.LimitLedgerKey(lim.Name, value, time.Time{})+".*")
	if err != nil {
		log.Warn().Err(err).Str("limit", lim.Name).Msg("limits ledger: list windows to drop the passed ones")
		return
	}
	now := l.env.Now()
	for key, e := range entries {
		_, _, window, err := contracts.ParseLimitLedgerKey(key)
		if err != nil || window.IsZero() || now.Before(window.Add(windowKept(lim))) {
			continue
		}
		if err := st.Delete(ctx, key, e.Revision); err != nil {
			log.Warn().Err(err).Str("limit", lim.Name).Str("key", key).Msg("limits ledger: drop a passed window")
			continue
		}
		l.ForgetKey(key)
	}
}

// DeleteRunLedgerKeys deletes the ledger keys of runID — every key of a limit keyed by
// run whose value is runID, or by step whose value is one of runID's steps, windows
// included — once the run has ended and takes no more batches: nothing can count in them
// again. A key written since it was listed is kept (a decision that raced the end).
func (l *Ledger) DeleteRunLedgerKeys(ctx context.Context, runID string) error {
	if l == nil {
		return nil
	}
	st, err := l.store(ctx)
	if err != nil {
		return err
	}
	for k := range l.limits {
		lim := &l.limits[k]
		var filters []string
		switch lim.Key {
		case contracts.LimitKeyRun:
			base := contracts.LimitLedgerKey(lim.Name, runID, time.Time{})
			filters = []string{base, base + ".*"}
		case contracts.LimitKeyStep:
			filters = []string{lim.Name + ".>"}
		default:
			continue
		}
		for _, filter := range filters {
			entries, err := st.List(ctx, filter)
			if err != nil {
				return fmt.Errorf("gate: limit %s: list the keys of run %s: %w", lim.Name, runID, err)
			}
			for key, e := range entries {
				_, value, _, err := contracts.ParseLimitLedgerKey(key)
				if err != nil || !runValue(lim, value, runID) {
					continue
				}
				switch err := st.Delete(ctx, key, e.Revision); {
				case errors.Is(err, state.ErrConflict):
					continue
				case err != nil:
					return fmt.Errorf("gate: limit %s: delete %s of run %s: %w", lim.Name, key, runID, err)
				}
				l.ForgetKey(key)
			}
		}
	}
	return nil
}

// Release gives op's share in ledger entry key back; a share not held is left alone, so a
// Release repeated by a redelivery gives back nothing more.
func (l *Ledger) Release(ctx context.Context, key, op string) error {
	st, err := l.store(ctx)
	if err != nil {
		return err
	}
	var folded []string
	_, _, err = st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
		folded = nil
		amount, held := cur.Held[op]
		if !exists || !held {
			return state.ErrNoChangeOnLeader
		}
		folded = l.foldEnded(key, cur, op)
		delete(cur.Held, op)
		cur.Used -= amount
		return nil
	})
	if err != nil {
		return fmt.Errorf("gate: limits: release %s in %s: %w", op, key, err)
	}
	l.forgetEnded(key, folded)
	return nil
}

// runValue reports whether value, a key value of lim (keyed by run or step), is runID's:
// the run id itself, or "{run id}/{step}" — a step number, so run "a" never claims the
// steps of run "a/1".
func runValue(lim *contracts.Limit, value, runID string) bool {
	if lim.Key == contracts.LimitKeyRun {
		return value == runID
	}
	step, ok := strings.CutPrefix(value, runID+"/")
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(step, 10, 64)
	return err == nil
}
