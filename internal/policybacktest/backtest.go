// Package policybacktest replays the gate decisions recorded in the audit stream, with
// the batch records they were made on, through another host configuration's policy, and
// compares them: POST /v1/policy/test and `awaken policy test`. A backtest reads the audit
// stream and the run and batches buckets and nothing else; it runs no tool, opens no
// ticket and writes nothing.
package policybacktest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/gatechain"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// Tester runs backtests over one deployment's audit stream and batch records. It
// only reads.
type Tester struct {
	js      jetstream.JetStream
	names   contracts.Names
	runs    *state.Store[contracts.RunRecord]
	batches *state.Store[contracts.BatchRecord]
	// annotations answers trusted MCP annotations for a candidate that trusts some
	// server (nil: none are known).
	annotations config.AnnotationSource
}

// New returns a tester over js (the streams of names) and the run and batches
// stores; annotations may be nil.
func New(js jetstream.JetStream, names contracts.Names, runs *state.Store[contracts.RunRecord],
	batches *state.Store[contracts.BatchRecord], annotations config.AnnotationSource) *Tester {
	return &Tester{js: js, names: names, runs: runs, batches: batches, annotations: annotations}
}

// Open binds a tester to the buckets of names on js, for tools (the CLI) that
// have a NATS connection but no service environment. The buckets must exist.
func Open(ctx context.Context, js jetstream.JetStream, names contracts.Names, annotations config.AnnotationSource) (*Tester, error) {
	names, err := bus.DeploymentNames(ctx, js, names)
	if err != nil {
		return nil, fmt.Errorf("policybacktest: %w", err)
	}
	runs, err := pipeline.OpenPartitioned[contracts.RunRecord](ctx, js, names, contracts.Names.RunsBucket, pipeline.RunKeyRoute(names))
	if err != nil {
		return nil, fmt.Errorf("policybacktest: %w", err)
	}
	batches, err := pipeline.OpenPartitioned[contracts.BatchRecord](ctx, js, names, contracts.Names.BatchesBucket, pipeline.RunKeyRoute(names))
	if err != nil {
		return nil, fmt.Errorf("policybacktest: %w", err)
	}
	return New(js, names, runs, batches, annotations), nil
}

// ParseConfig parses a candidate host configuration; a configuration that does
// not load is an invalid_request naming the field.
func ParseConfig(text string) (*config.Config, error) {
	if strings.TrimSpace(text) == "" {
		return nil, invalidRequest("config: the candidate host configuration is empty")
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		return nil, &httpapi.Error{Code: httpapi.CodeInvalidRequest, Message: "config: " + err.Error(), Status: http.StatusBadRequest, Err: err}
	}
	return cfg, nil
}

// Run replays the decisions req selects through cand, whose Annotations it sets from the
// tester's when cand has none. Bad input (an unknown run id shape, Since after Until) is an
// invalid_request.
func (pt *Tester) Run(ctx context.Context, cand *config.Config, req httpapi.PolicyTestRequest) (httpapi.PolicyTestReport, error) {
	if req.Since != nil && req.Until != nil && req.Since.After(*req.Until) {
		return httpapi.PolicyTestReport{}, invalidRequest("since %s is after until %s",
			req.Since.Format(time.RFC3339), req.Until.Format(time.RFC3339))
	}
	for _, r := range req.Runs {
		if err := contracts.ValidateID("run_id", r); err != nil {
			return httpapi.PolicyTestReport{}, &httpapi.Error{Code: httpapi.CodeInvalidRequest, Message: err.Error(), Status: http.StatusBadRequest, Err: err}
		}
	}
	host, err := contracts.CompilePolicy(cand.Policy)
	if err != nil {
		// config.Parse compiled it already; a hand-built configuration may not have.
		return httpapi.PolicyTestReport{}, &httpapi.Error{Code: httpapi.CodeInvalidRequest, Message: "config: policy: " + err.Error(), Status: http.StatusBadRequest, Err: err}
	}
	if cand.Annotations == nil {
		cand.Annotations = pt.annotations
	}
	decisions, err := pt.decisions(ctx, req)
	if err != nil {
		return httpapi.PolicyTestReport{}, err
	}
	r := replayer{chain: gatechain.Chain{Config: cand, Host: host}, pt: pt, batches: map[string]*batchRead{}}
	rep := httpapi.PolicyTestReport{Calls: []httpapi.PolicyTestCall{}}
	for _, a := range decisions {
		c, err := r.replay(ctx, a)
		if err != nil {
			return httpapi.PolicyTestReport{}, err
		}
		rep.Calls = append(rep.Calls, c)
		if rep.Oldest == nil || a.At.Before(*rep.Oldest) {
			at := a.At
			rep.Oldest = &at
		}
	}
	tally(&rep, host, len(cand.Policy.Rules))
	return rep, nil
}

// decisions reads the gate decisions req selects from the audit stream, in stream order:
// one per call (the first audited; a redelivery stores no second one, but a decision
// audited again past the duplicate window is read once), without the resolutions of
// tickets. Each subject it reads (every run's, or each run req names) is read by an
// ordered consumer of its own up to the last record it held when the consumer was
// created, and the records are merged by stream sequence. It asks the server nothing but
// those consumers: neither stream info nor more than one filter a consumer, which the api
// user's grants (deploy/nats/auth.conf) pin to one run's audit subject.
func (pt *Tester) decisions(ctx context.Context, req httpapi.PolicyTestRequest) ([]contracts.AuditRecord, error) {
	// A run's audit subject has one token after the prefix (run ids hold no dots), so the
	// wildcard leaves out awaken.audit.tools.pause.
	// Each partition has its audit stream: every run's subjects of each, or each named
	// run's in its partition's.
	type filter struct {
		part            int
		stream, subject string
	}
	var filters []filter
	for _, pn := range pt.names.EachPartition() {
		filters = append(filters, filter{pn.PartitionIndex(), pn.AuditStream(), pn.AuditPrefix() + "*"})
	}
	if len(req.Runs) > 0 {
		filters = filters[:0]
		for _, r := range slices.Compact(slices.Sorted(slices.Values(req.Runs))) {
			pn := pt.names.Of(r)
			filters = append(filters, filter{pn.PartitionIndex(), pn.AuditStream(), pt.names.AuditSubject(r)})
		}
	}
	var read []sequenced
	for _, f := range filters {
		got, err := pt.readAudit(ctx, f.stream, f.subject, req)
		if err != nil {
			return nil, err
		}
		for i := range got {
			got[i].part = f.part
		}
		read = append(read, got...)
	}
	slices.SortFunc(read, func(a, b sequenced) int { return cmp.Or(cmp.Compare(a.part, b.part), cmp.Compare(a.seq, b.seq)) })
	var out []contracts.AuditRecord
	seen := map[string]bool{}
	for _, r := range read {
		if key := r.rec.BatchID + "\x00" + r.rec.CallID; !seen[key] {
			seen[key] = true
			out = append(out, r.rec)
		}
	}
	return out, nil
}

// sequenced is an audit record and its stream sequence.
type sequenced struct {
	part int // the partition whose audit stream holds it
	seq  uint64
	rec  contracts.AuditRecord
}

// readAudit reads the gate decisions on audit subject filter that req selects, up to the
// last record the subject held when it began.
func (pt *Tester) readAudit(ctx context.Context, stream, filter string, req httpapi.PolicyTestRequest) ([]sequenced, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if req.Since != nil {
		// A decision is stored after it is made, so no decision at or after Since is
		// stored before it.
		since := *req.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := pt.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("policybacktest: read %s: %w", stream, err)
	}
	defer func() {
		// Deleted at once rather than left to its inactivity threshold. Each Fetch of an
		// ordered consumer replaces the server's consumer (nats.go deletes the one before
		// in the background): this is the last.
		if info := cons.CachedInfo(); info != nil {
			_ = pt.js.DeleteConsumer(context.WithoutCancel(ctx), stream, info.Name)
		}
	}()
	info := cons.CachedInfo()
	if info == nil {
		return nil, fmt.Errorf("policybacktest: read %s: the consumer was created without its info", stream)
	}
	var out []sequenced
	for left := info.NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 256)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("policybacktest: read %s: %w", stream, err)
		}
		got := uint64(0)
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("policybacktest: read %s: %w", stream, err)
			}
			if a, ok := gateDecision(m); ok && inWindow(a.At, req) {
				out = append(out, sequenced{seq: md.Sequence.Stream, rec: a})
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("policybacktest: read %s: %w", stream, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("policybacktest: %w", err)
		}
		if got == 0 {
			// Counted at the start and not delivered: removed since (a purge, or limits
			// given to the stream), or not readable. A report without them would say
			// they were never decided, so there is none.
			return nil, fmt.Errorf("policybacktest: read %s: %d records announced on %s, none delivered", stream, left, filter)
		}
		left -= min(got, left)
	}
	return out, nil
}

// gateDecision decodes m as the audit record of a gate decision: not a resolution (which
// names an actor or a resolution label) and not a record of another type.
func gateDecision(m jetstream.Msg) (contracts.AuditRecord, bool) {
	ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data())
	if err != nil || ev.Type != contracts.TypeAudit {
		return contracts.AuditRecord{}, false
	}
	var a contracts.AuditRecord
	if err := json.Unmarshal(ev.Data, &a); err != nil || a.Actor != "" {
		return contracts.AuditRecord{}, false
	}
	switch a.Decision {
	case contracts.AuditDecisionAllow, contracts.AuditDecisionDeny, contracts.AuditDecisionSetResult,
		contracts.AuditDecisionAsk, contracts.AuditDecisionSchedule:
		return a, true
	}
	return contracts.AuditRecord{}, false
}

func inWindow(at time.Time, req httpapi.PolicyTestRequest) bool {
	return (req.Since == nil || !at.Before(*req.Since)) && (req.Until == nil || !at.After(*req.Until))
}

// replayer replays decisions through one candidate chain, reading each batch once.
type replayer struct {
	chain   gatechain.Chain
	pt      *Tester
	batches map[string]*batchRead
}

// batchRead is one batch as read: its record and compiled run policy, or why it is
// missing.
type batchRead struct {
	rec     contracts.BatchRecord
	run     gatechain.RunPolicy
	missing string
}

// replay is the row of recorded decision a.
func (r *replayer) replay(ctx context.Context, a contracts.AuditRecord) (httpapi.PolicyTestCall, error) {
	c := httpapi.PolicyTestCall{BatchID: a.BatchID, CallID: a.CallID, ToolID: a.ToolID, DecidedAt: a.At, Old: a.Decision, OldReason: a.Reason}
	b, err := r.batch(ctx, a.BatchID)
	if err != nil {
		return c, err
	}
	if b.missing != "" {
		c.Missing = b.missing
		return c, nil
	}
	i := slices.IndexFunc(b.rec.Submission.Calls, func(tc contracts.ToolCall) bool { return tc.CallID == a.CallID })
	if i < 0 {
		c.Missing = "the batch record holds no call " + a.CallID
		return c, nil
	}
	if a.Decision == contracts.AuditDecisionDeny && strings.HasPrefix(a.Reason, contracts.ToolPausedCode+":") {
		c.New, c.NewReason, c.Rule = a.Decision, a.Reason, ruleToolPaused
		return c, nil
	}
	d := r.chain.Decide(&b.rec, i, nil, b.run)
	switch {
	case d.Outcome != nil:
		c.New, c.NewReason, c.Shadow = d.Outcome.AuditLabel(), d.Outcome.Reason, d.Outcome.Shadow
	case d.Unknown:
		c.New = gatechain.WouldUnknownTool
	case d.Invalid != nil:
		c.New, c.NewReason = "invalid_arguments", d.Invalid.Error()
	case d.Bound != "":
		c.New, c.NewReason = gatechain.WouldCapabilityBound, d.Bound
	case d.Client:
		c.New = "client_executed"
	}
	c.Rule = r.ruleOf(&b.rec, b.run, d)
	c.Changed = c.New != c.Old || c.NewReason != c.OldReason
	return c, nil
}

// Rule labels of decisions no rule of the candidate made.
const (
	ruleToolPaused  = "tool_paused"
	ruleRunPolicy   = "run policy"
	ruleRunInvalid  = "run policy invalid"
	ruleDenyAll     = "deny_all"
	ruleUnevaluated = "none"
)

// ruleOf names what decided d (see [httpapi.PolicyTestCall.Rule]).
func (r *replayer) ruleOf(b *contracts.BatchRecord, run gatechain.RunPolicy, d gatechain.Decision) string {
	switch {
	case d.Host == nil && b.Submission.Narrowing.DeniesAll():
		return ruleDenyAll
	case d.Host == nil && run.Err != nil:
		return ruleRunInvalid
	case d.Host == nil:
		return ruleUnevaluated
	case d.Narrowed:
		return ruleRunPolicy
	case d.Host.Basis == contracts.BasisRule:
		return ruleName(d.Host.RuleIndex, r.chain.Host.RulePattern(d.Host.RuleIndex))
	}
	return string(d.Host.Basis)
}

func ruleName(i int, pattern string) string { return fmt.Sprintf("rules[%d] %s", i, pattern) }

// batch reads batch id once ([pipeline.ReadBatch]: the run record while it holds it, else
// the archive) and compiles its run policy.
func (r *replayer) batch(ctx context.Context, id string) (*batchRead, error) {
	if b, ok := r.batches[id]; ok {
		return b, nil
	}
	b := &batchRead{}
	r.batches[id] = b
	runID, step, err := contracts.ParseBatchID(id)
	if err != nil {
		b.missing = fmt.Sprintf("the audit names an invalid batch id: %v", err)
		return b, nil
	}
	rec, err := pipeline.ReadBatch(ctx, r.pt.runs, r.pt.batches, runID, step, false)
	switch {
	case errors.Is(err, state.ErrNotFound):
		b.missing = "the batch record is gone"
		return b, nil
	case err != nil:
		return nil, fmt.Errorf("policybacktest: %w", err)
	}
	b.rec = rec
	if p := rec.Submission.Policy; p != nil {
		b.run.Policy, b.run.Err = contracts.CompilePolicy(*p)
	}
	return b, nil
}

// tally fills the totals and the counts per rule; host is the candidate's policy with n
// rules.
func tally(rep *httpapi.PolicyTestReport, host *contracts.Policy, n int) {
	counts := map[string]httpapi.PolicyTestRule{}
	order := make([]string, 0, n)
	for i := range n {
		name := ruleName(i, host.RulePattern(i))
		order = append(order, name)
		counts[name] = httpapi.PolicyTestRule{Rule: name, Shadow: host.IsShadow(i)}
	}
	var others []string
	count := func(name string, changed bool) {
		rr, ok := counts[name]
		if !ok {
			rr = httpapi.PolicyTestRule{Rule: name}
			others = append(others, name)
		}
		rr.Calls++
		if changed {
			rr.Changed++
		}
		counts[name] = rr
	}
	for _, c := range rep.Calls {
		rep.Total++
		if c.Missing != "" {
			rep.Missing++
			continue
		}
		if c.Changed {
			rep.Changed++
		}
		count(c.Rule, c.Changed)
		for _, f := range c.Shadow {
			if f.Policy == contracts.ShadowPolicyHost {
				count(ruleName(f.Index, f.Rule), f.Would != c.New || f.Reason != c.NewReason)
			}
		}
	}
	slices.Sort(others)
	rep.Rules = make([]httpapi.PolicyTestRule, 0, len(order)+len(others))
	for _, name := range append(order, others...) {
		rep.Rules = append(rep.Rules, counts[name])
	}
}

// invalidRequest is the 400 invalid_request *httpapi.Error of bad input, which the api
// answers as is.
func invalidRequest(format string, args ...any) *httpapi.Error {
	return &httpapi.Error{Code: httpapi.CodeInvalidRequest, Message: fmt.Sprintf(format, args...), Status: http.StatusBadRequest}
}
