package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// FaultAfterLimitReserve fires after a limit's ledger write reserved a call's share and
// before the decision that counts on it is recorded: a crash there leaves the reservation
// without a decision, which the redelivered request finds held and does not count again.
const FaultAfterLimitReserve pipeline.FaultPoint = "after-limit-reserve"

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

// limiter accounts the host policy's limits in the limits ledger. It is nil-safe: a gate
// whose host policy has no limits has a nil limiter and writes nothing for them.
type limiter struct {
	env    *pipeline.Env
	limits []contracts.Limit

	once   sync.Once
	ledger *state.Store[contracts.LimitLedgerEntry]
	err    error
}

func newLimiter(env *pipeline.Env, host *contracts.Policy) *limiter {
	if len(host.Limits()) == 0 {
		return nil
	}
	return &limiter{env: env, limits: host.Limits()}
}

// store opens the ledger bucket once; a missing bucket (a deployment set up before limits
// existed) is an error at every decision a limit applies to, so limits fail closed.
func (l *limiter) store(ctx context.Context) (*state.Store[contracts.LimitLedgerEntry], error) {
	l.once.Do(func() {
		kv, err := l.env.JS.KeyValue(ctx, l.env.Names.LimitsBucket())
		if err != nil {
			l.err = fmt.Errorf("gate: limits ledger %s (run awaken setup): %w", l.env.Names.LimitsBucket(), err)
			if !errors.Is(err, jetstream.ErrBucketNotFound) {
				// A transient failure is retried at the next decision.
				l.once = sync.Once{}
			}
			return
		}
		l.ledger = state.NewStore[contracts.LimitLedgerEntry](kv, state.WithJetStream(l.env.JS))
	})
	if l.ledger == nil {
		return nil, l.err
	}
	return l.ledger, nil
}

// counts reports whether a call decided o takes a share of the limits: one that may run
// (allow, ask, schedule). A blocked call or one answered with a fixed result runs no tool.
func counts(o *contracts.GateOutcome) bool {
	switch o.Kind {
	case contracts.GateAllow, contracts.GateRequireConfirmation, contracts.GateSchedule:
		return true
	}
	return false
}

// apply runs the host limits over the chain's outcome o for call i of b and returns the
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
func (l *limiter) apply(ctx context.Context, b *contracts.BatchRecord, i int, o *contracts.GateOutcome) (*contracts.GateOutcome, error) {
	if l == nil || o == nil || !counts(o) {
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
	waiting := l.waitingRate(call)
	if out.Kind == contracts.GateRequireConfirmation {
		waiting = nil
	}
	// Every ledger write of the decision is a step of its own: a crash after it leaves the
	// share reserved and the decision that counts on it unrecorded.
	ledger := l.env.Operation(ServiceName, op)
	if waiting != nil {
		var until time.Time
		var blocked bool
		if err := ledger.Step(ctx, FaultAfterLimitReserve, func() (reached bool, err error) {
			until, blocked, err = l.reserveAhead(ctx, waiting, b, op)
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
		if err := ledger.Step(ctx, FaultAfterLimitReserve, func() (_ bool, err error) {
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

// block is the outcome of a call over live limit lim: its share in the limits before is
// given back (it never runs), and it completes with lim's reason.
func (l *limiter) block(ctx context.Context, lim *contracts.Limit, op string, reserved []string, reason string) (*contracts.GateOutcome, error) {
	for _, key := range reserved {
		if err := l.release(ctx, key, op); err != nil {
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
func (l *limiter) reserve(ctx context.Context, lim *contracts.Limit, key, value string, window time.Time,
	op string, amount float64, force bool) (string, error) {
	st, err := l.store(ctx)
	if err != nil {
		return "", err
	}
	outcome := limitCounted
	_, _, err = st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
		outcome = limitCounted
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
	return outcome, nil
}

// release gives op's share in ledger entry key back; a share not held is left alone, so a
// release repeated by a redelivery gives back nothing more.
func (l *limiter) release(ctx context.Context, key, op string) error {
	st, err := l.store(ctx)
	if err != nil {
		return err
	}
	_, _, err = st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
		amount, held := cur.Held[op]
		if !exists || !held {
			return state.ErrNoChangeOnLeader
		}
		delete(cur.Held, op)
		cur.Used -= amount
		return nil
	})
	if err != nil {
		return fmt.Errorf("gate: limits: release %s in %s: %w", op, key, err)
	}
	return nil
}
