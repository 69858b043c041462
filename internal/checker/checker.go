// Package checker verifies a recorded chaos history against what the pipeline durably did,
// in the manner of a Jepsen checker: the test records what it submitted, which calls it
// expected to be denied or approved, and when it killed what; the checker then reads the
// results stream, the ticket and audit streams and the body-run ledger, and reports every
// violation of the pipeline's promises — exactly-once publication in model order, atomic
// publication, at most one run of a never_replay body, every Indeterminate outcome
// explained by a fault, and nothing run that was not allowed.
//
// The checker is pure: [Check] is a function of a [History] and an [Observed] snapshot, so
// it is unit-tested against hand-made bad histories. [Read] takes the snapshot from a
// server once the pipeline is quiescent; with a retention short enough for messages to
// expire during the run, [Follow] reads the streams as the run goes on and takes the
// snapshot from what it read ([Tail.Snapshot]).
package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Expectation is what the test knows the host policy decides for a call.
type Expectation int

const (
	// ExpectAllowed: the call may run (the zero value).
	ExpectAllowed Expectation = iota
	// ExpectDenied: the call is denied or blocked by policy; its body must never run.
	ExpectDenied
	// ExpectApproval: the call asks a human; its body may run only after an approval was
	// recorded in the audit stream.
	ExpectApproval
)

// Batch is one submission the test made.
type Batch struct {
	// Submission is the batch as submitted.
	Submission contracts.BatchSubmission
	// SubmittedAt is when the test first tried to submit it (before the stream's ack).
	SubmittedAt time.Time
	// Rejected marks a submission the pipeline refused on purpose (it must not publish).
	Rejected bool
	// Expect holds, by call id, what policy decides for a call (missing: allowed).
	Expect map[string]Expectation
}

// Kill is one fault the test injected: a process killed (or a whole stack crashed).
type Kill struct {
	// Target names what was killed ("gate", "nats-server", "stack", …).
	Target string
	// At is when the kill was sent.
	At time.Time
	// Until, when set, is when a fault that lasted (a node stopped, cut off, frozen)
	// was healed: the fault disturbs a batch in flight at any moment from At to Until.
	Until time.Time
}

// Cancel is a run cancellation the test requested; it explains "cancelled" outcomes.
type Cancel struct {
	RunID string
	At    time.Time
}

// History is everything the test did. It is built by one goroutine or under the test's
// own lock; the checker only reads it.
type History struct {
	Batches []Batch
	Kills   []Kill
	Cancels []Cancel
}

// streamSeq is where a message is stored: its stream and sequence.
type streamSeq struct {
	stream string
	seq    uint64
}

func (m Message) at() streamSeq { return streamSeq{m.Stream, m.Seq} }

// Message is one stream message as the checker sees it.
type Message struct {
	// Seq is the stream sequence in Stream (each partition has its results and audit
	// streams); Time the server's store time.
	Seq    uint64
	Stream string
	Time   time.Time
	// Subject and Type are the NATS subject and the CloudEvent type.
	Subject string
	Type    string
	// Data is the CloudEvent data.
	Data []byte
}

// LedgerEntry is the body-run ledger of one operation: how many times its body started,
// and when the last start was recorded.
type LedgerEntry struct {
	Count int
	At    time.Time
}

// Observed is a snapshot of what the pipeline durably did.
type Observed struct {
	// Results is the results stream in sequence order.
	Results []Message
	// Audit is the audit stream in sequence order.
	Audit []Message
	// Tickets is the tickets stream in sequence order.
	Tickets []Message
	// Ledger is the body-run ledger by contracts.OperationKey(run, step, call).
	Ledger map[string]LedgerEntry
}

// Rules is what the checker must know of the host configuration.
type Rules struct {
	// NeverReplay reports whether a tool's pinned recovery mode is never_replay.
	NeverReplay func(toolID string) bool
}

// RulesFor derives the rules from the host configuration every service ran with.
func RulesFor(cfg *config.Config) Rules {
	return Rules{NeverReplay: func(toolID string) bool {
		return cfg.Pin(toolID).Policy.Mode == contracts.ModeNeverReplay
	}}
}

// Kind classifies a violation.
type Kind string

// The violation kinds, one per promise.
const (
	// KindLost: an accepted batch was never published.
	KindLost Kind = "lost"
	// KindDuplicate: a batch was published more than once, or a result repeated.
	KindDuplicate Kind = "duplicate"
	// KindOrder: results missing, extra, out of model order or naming the wrong call.
	KindOrder Kind = "order"
	// KindNotAtomic: a batch's results and finalized event are not one contiguous run on
	// the stream, or a body started after its batch's results were published.
	KindNotAtomic Kind = "not-atomic"
	// KindReplayed: a never_replay body ran more than once.
	KindReplayed Kind = "replayed"
	// KindUnexplained: an Indeterminate outcome with no fault to explain it.
	KindUnexplained Kind = "unexplained-indeterminate"
	// KindUnauthorized: a denied or blocked call ran, or a call needing approval ran
	// before (or without) its approval.
	KindUnauthorized Kind = "unauthorized"
	// KindRejectedPublished: a batch the pipeline rejected has results.
	KindRejectedPublished Kind = "rejected-published"
	// KindMalformed: a stream message the checker cannot decode.
	KindMalformed Kind = "malformed"
)

// Violation is one broken promise.
type Violation struct {
	Kind    Kind
	BatchID string
	CallID  string
	Detail  string
}

func (v Violation) String() string {
	s := string(v.Kind) + " " + v.BatchID
	if v.CallID != "" {
		s += " call " + v.CallID
	}
	return s + ": " + v.Detail
}

// Report is the checker's verdict.
type Report struct {
	Batches, Calls, Kills, Indeterminate, Duplicates, Lost int
	Violations                                             []Violation
}

// OK reports whether no violation was found.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Summary is the one-line verdict printed by tests and `make chaos`.
func (r Report) Summary() string {
	return fmt.Sprintf("checker: batches=%d calls=%d kills=%d indeterminate=%d duplicates=%d lost=%d violations=%d",
		r.Batches, r.Calls, r.Kills, r.Indeterminate, r.Duplicates, r.Lost, len(r.Violations))
}

// Has reports whether the report holds a violation of kind k.
func (r Report) Has(k Kind) bool {
	return slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Kind == k })
}

// recoveryReasons are the Indeterminate reasons a fault may produce; anything else (in
// particular a reason the checker does not know) is unexplained.
func explainedReason(reason string) bool {
	switch {
	case reason == execcore.ReasonOwnerLeaseExpired, reason == execcore.ReasonAttemptsExhausted:
		return true
	case strings.Contains(reason, " gave up after "): // an executor's exhausted request
		return true
	case strings.HasPrefix(reason, "gate: ") && strings.HasSuffix(reason, "failed on every delivery"):
		return true
	}
	return false
}

const indeterminatePrefix = "tool outcome is indeterminate: "

// publication is one batch's published messages, in stream order. A results message
// (io.awaken.toolbatch.results.v1) counts as a finalized message and adds each of its
// results, all at its own stream position.
type publication struct {
	results   []resultMsg
	finalized []Message
}

type resultMsg struct {
	Message
	ev contracts.ToolResultEvent
}

// Check compares the history with the observed snapshot and reports every violation.
func Check(h History, o *Observed, rules Rules) Report {
	r := Report{Batches: len(h.Batches), Kills: len(h.Kills)}
	add := func(k Kind, batch, call, format string, args ...any) {
		r.Violations = append(r.Violations, Violation{k, batch, call, fmt.Sprintf(format, args...)})
	}
	pubs := map[string]*publication{}
	pub := func(id string) *publication {
		p := pubs[id]
		if p == nil {
			p = &publication{}
			pubs[id] = p
		}
		return p
	}
	// The results stream in order: also index each message's position so contiguity is a
	// check on positions (sequences can have gaps only where messages were deleted).
	pos := map[streamSeq]int{}
	for i, m := range o.Results {
		pos[m.at()] = i
		switch m.Type {
		case contracts.TypeToolResult:
			ev, ok := decodeOrReport[contracts.ToolResultEvent](m, "result", add)
			if !ok {
				continue
			}
			p := pub(ev.BatchID)
			p.results = append(p.results, resultMsg{m, ev})
		case contracts.TypeBatchFinalized:
			f, ok := decodeOrReport[contracts.BatchFinalized](m, "finalized", add)
			if !ok {
				continue
			}
			p := pub(f.BatchID)
			p.finalized = append(p.finalized, m)
		case contracts.TypeBatchResults:
			b, ok := decodeOrReport[contracts.BatchResults](m, "results", add)
			if !ok {
				continue
			}
			p := pub(b.BatchID)
			for _, ev := range b.Results {
				p.results = append(p.results, resultMsg{m, ev})
			}
			p.finalized = append(p.finalized, m)
		default:
			add(KindMalformed, "", "", "unexpected type %q at seq %d", m.Type, m.Seq)
		}
	}
	approvals := approvalsFrom(o, add)
	submitted := map[string]bool{}
	for _, b := range h.Batches {
		sub := b.Submission
		id := sub.BatchID()
		submitted[id] = true
		p := pubs[id]
		if b.Rejected {
			if p != nil {
				add(KindRejectedPublished, id, "", "a rejected batch has %d results and %d finalized events", len(p.results), len(p.finalized))
			}
			continue
		}
		r.Calls += len(sub.Calls)
		if p == nil || len(p.finalized) == 0 {
			r.Lost++
			add(KindLost, id, "", "accepted batch never published")
			checkCalls(&r, h, b, nil, time.Time{}, o, rules, approvals, add)
			continue
		}
		if n := len(p.finalized); n > 1 {
			r.Duplicates += n - 1
			add(KindDuplicate, id, "", "published %d times", n)
		}
		n := len(sub.Calls)
		if len(p.results) != n {
			if len(p.results) > n {
				r.Duplicates += len(p.results) - n
			}
			add(KindOrder, id, "", "%d results for %d calls", len(p.results), n)
		}
		for i, res := range p.results {
			if i >= n {
				break
			}
			want := sub.Calls[i]
			if res.ev.Index != i || res.ev.CallID != want.CallID || res.ev.ToolID != want.ToolID || res.ev.RunID != sub.RunID {
				add(KindOrder, id, res.ev.CallID, "result %d is (index %d, call %s, tool %s), want (index %d, call %s, tool %s)",
					i, res.ev.Index, res.ev.CallID, res.ev.ToolID, i, want.CallID, want.ToolID)
			}
		}
		// Atomic publication: the first publication's results then its finalized event
		// occupy consecutive positions on the stream — or it is one results message,
		// atomic by construction.
		first := p.finalized[0]
		if len(p.results) >= n && n > 0 && first.Type != contracts.TypeBatchResults {
			start := pos[p.results[0].at()]
			for i := range n {
				if pos[p.results[i].at()] != start+i {
					add(KindNotAtomic, id, p.results[i].ev.CallID, "result %d at stream position %d, want %d (contiguous)", i, pos[p.results[i].at()], start+i)
					break
				}
			}
			if pos[first.at()] != start+n {
				add(KindNotAtomic, id, "", "finalized at stream position %d, want %d (right after the results)", pos[first.at()], start+n)
			}
		}
		var publishedAt time.Time = first.Time
		if len(p.results) > 0 && p.results[0].Time.Before(publishedAt) {
			publishedAt = p.results[0].Time
		}
		checkCalls(&r, h, b, p.results, publishedAt, o, rules, approvals, add)
	}
	for id, p := range pubs {
		if !submitted[id] {
			add(KindDuplicate, id, "", "published (%d results) but never submitted", len(p.results))
		}
	}
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return strings.Compare(a.BatchID, b.BatchID) })
	return r
}

// checkCalls checks the per-call promises of one batch: ledger, authorization, and the
// explanation of every Indeterminate outcome. results may be nil (a lost batch).
func checkCalls(r *Report, h History, b Batch, results []resultMsg, publishedAt time.Time, o *Observed, rules Rules,
	approvals map[string]time.Time, add reportFunc) {
	sub := b.Submission
	id := sub.BatchID()
	for i, c := range sub.Calls {
		led := o.Ledger[contracts.OperationKey(sub.RunID, sub.Step, c.CallID)]
		if led.Count > 1 && rules.NeverReplay != nil && rules.NeverReplay(c.ToolID) {
			add(KindReplayed, id, c.CallID, "never_replay body of %s ran %d times", c.ToolID, led.Count)
		}
		if led.Count > 0 && !publishedAt.IsZero() && led.At.After(publishedAt) {
			add(KindNotAtomic, id, c.CallID, "body started at %s, after the batch was published at %s",
				led.At.Format(time.RFC3339Nano), publishedAt.Format(time.RFC3339Nano))
		}
		op := contracts.OperationID(sub.RunID, sub.Step, c.CallID)
		switch b.Expect[c.CallID] {
		case ExpectDenied:
			if led.Count > 0 {
				add(KindUnauthorized, id, c.CallID, "denied call %s ran %d times", c.ToolID, led.Count)
			}
		case ExpectApproval:
			if led.Count > 0 {
				at, ok := approvals[op]
				switch {
				case !ok:
					add(KindUnauthorized, id, c.CallID, "%s ran %d times without a recorded approval", c.ToolID, led.Count)
				case led.At.Before(at):
					add(KindUnauthorized, id, c.CallID, "%s ran at %s, before its approval at %s", c.ToolID,
						led.At.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
				}
			}
		}
		if i >= len(results) {
			continue
		}
		res := results[i].ev
		if res.Outcome != contracts.OutcomeIndeterminate {
			continue
		}
		r.Indeterminate++
		reason, _ := strings.CutPrefix(res.Output.Text(), indeterminatePrefix)
		switch {
		case reason == "cancelled":
			if !slices.ContainsFunc(h.Cancels, func(k Cancel) bool { return k.RunID == sub.RunID }) {
				add(KindUnexplained, id, c.CallID, "cancelled, but the run was never cancelled")
			}
		case !explainedReason(reason):
			add(KindUnexplained, id, c.CallID, "reason %q is not a recovery reason", reason)
		case !killedWithin(h.Kills, b.SubmittedAt, publishedAt):
			add(KindUnexplained, id, c.CallID, "reason %q but no kill between submission (%s) and publication (%s)",
				reason, b.SubmittedAt.Format(time.RFC3339Nano), publishedAt.Format(time.RFC3339Nano))
		}
	}
}

// killedWithin reports whether a kill happened while the batch was active: its instant
// within [from, to], or for a fault that lasted, its span [At, Until] overlapping it (a
// batch submitted and published while a node was down was disturbed all along).
func killedWithin(kills []Kill, from, to time.Time) bool {
	return slices.ContainsFunc(kills, func(k Kill) bool {
		end := k.At
		if k.Until.After(end) {
			end = k.Until
		}
		return !k.At.After(to) && !end.Before(from)
	})
}

// approvalsFrom returns, by operation id, the earliest time an approval of the call was
// recorded: an audit record with decision approved (or scheduled, the system's approval)
// AND a ticket resolution with code approved. The audit stream is the record of truth; a
// resolution without an audit record (or the reverse) does not count.
func approvalsFrom(o *Observed, add reportFunc) map[string]time.Time {
	resolved := map[string]bool{}
	for _, m := range o.Tickets {
		if m.Type != contracts.TypeTicketResolved {
			continue
		}
		tr, ok := decodeOrReport[contracts.TicketResolution](m, "ticket resolution", add)
		if !ok {
			continue
		}
		if tr.Code == "approved" {
			resolved[tr.CorrelationID] = true
		}
	}
	out := map[string]time.Time{}
	for _, m := range o.Audit {
		a, ok := decodeOrReport[contracts.AuditRecord](m, "audit", add)
		if !ok {
			continue
		}
		if a.Decision != "approved" && a.Decision != "scheduled" {
			continue
		}
		run, step, err := contracts.ParseBatchID(a.BatchID)
		if err != nil {
			add(KindMalformed, a.BatchID, a.CallID, "audit seq %d: bad batch id", m.Seq)
			continue
		}
		corrPerm := contracts.CorrelationID(contracts.ReasonPermission, run, step, a.CallID)
		corrSched := contracts.CorrelationID(contracts.ReasonScheduledAction, run, step, a.CallID)
		if !resolved[corrPerm] && !resolved[corrSched] {
			continue
		}
		op := contracts.OperationID(run, step, a.CallID)
		if t, seen := out[op]; !seen || m.Time.Before(t) {
			out[op] = m.Time
		}
	}
	return out
}
