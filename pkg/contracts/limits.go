package contracts

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts/toolpattern"
)

// MaxRateWaitWindows is how many windows past its own a call over a rate limit with
// over: wait may be deferred: beyond, it is blocked (rate_limited) instead of scheduled
// further out.
const MaxRateWaitWindows = 16

// MaxLimits bounds the limits of one host policy: every call is matched against every
// limit, and every matching limit costs the gate a ledger write.
const MaxLimits = 64

// LimitConfig is one entry of a host policy's `limits:`. It applies to the calls of the
// tools its patterns match (the rule grammar), keyed by a value drawn from the submission
// (Key), and holds exactly one kind: Concurrency, Count, Rate or Budget.
type LimitConfig struct {
	// Name names the limit in decisions, audit records, metrics and GET /v1/limits.
	Name string `json:"name" yaml:"name"`
	// Tools are tool patterns, as rules use them; a call matches when one matches.
	Tools []string `json:"tools" yaml:"tools"`
	// Key is run, step, thread, agent, tenant, label:NAME or global.
	Key string `json:"key" yaml:"key"`
	// Concurrency: at most N calls executing at once per key. A call over it waits, in
	// order, for a slot: it is taken when the gate hands the call to its executor and given
	// back when the call ends.
	Concurrency *int `json:"concurrency,omitempty" yaml:"concurrency,omitempty"`
	// Rate: at most N calls per window per key.
	Rate *RateLimitConfig `json:"rate,omitempty" yaml:"rate,omitempty"`
	// Count: at most N calls per key (per run with key run, per step with key step).
	Count *int `json:"count,omitempty" yaml:"count,omitempty"`
	// Budget: the matching calls' costs (each tool's configured cost) summed per key, over
	// the window or for ever, at most Amount.
	Budget *BudgetLimitConfig `json:"budget,omitempty" yaml:"budget,omitempty"`
	// Over is what a call over the limit gets: block (the default, and the only choice for
	// a count), ask for a budget (a ticket whose approval grants the overrun), wait for a rate
	// (scheduled to the first later window with room) and for a concurrency limit (its
	// default and only choice).
	Over LimitOver `json:"over,omitempty" yaml:"over,omitempty"`
	// Shadow makes the limit log-only: it is accounted in its own ledger entries and what it
	// would have done is recorded in the audit, but it never changes a decision.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
}

// RateLimitConfig is a rate limit: at most N calls in each window (a Go duration string).
type RateLimitConfig struct {
	N      int    `json:"n" yaml:"n"`
	Window string `json:"window" yaml:"window"`
}

// BudgetLimitConfig is a budget: Amount of cost per key, per Window (a Go duration
// string) or, with no window, for the key's whole life (a run's, a tenant's).
type BudgetLimitConfig struct {
	Amount float64 `json:"amount" yaml:"amount"`
	Window string  `json:"window,omitempty" yaml:"window,omitempty"`
}

// LimitOver is what a call over a limit gets.
type LimitOver string

const (
	LimitOverBlock LimitOver = "block"
	LimitOverAsk   LimitOver = "ask"
	LimitOverWait  LimitOver = "wait"
)

// LimitKind is the kind of a compiled [Limit].
type LimitKind string

const (
	LimitConcurrency LimitKind = "concurrency"
	LimitCount       LimitKind = "count"
	LimitRate        LimitKind = "rate"
	LimitBudget      LimitKind = "budget"
)

// Model-visible reasons of a call a limit blocked (the call's output is
// "blocked: {reason}: …").
const (
	ReasonCountExceeded = "count_exceeded"
	// ReasonConcurrencyLimited names a concurrency limit in the wait of a call held back
	// by it (never in a blocked output: such a call waits).
	ReasonConcurrencyLimited = "concurrency_limited"
	ReasonRateLimited        = "rate_limited"
	ReasonBudgetExhausted    = "budget_exhausted"
)

// Limit keys.
const (
	LimitKeyRun    = "run"
	LimitKeyStep   = "step"
	LimitKeyThread = "thread"
	LimitKeyAgent  = "agent"
	LimitKeyTenant = "tenant"
	LimitKeyGlobal = "global"
	// LimitKeyLabelPrefix starts a label key: label:NAME keys by the submission's
	// metadata value NAME.
	LimitKeyLabelPrefix = "label:"
)

// Limit is one compiled [LimitConfig]. It is immutable.
type Limit struct {
	Name   string
	Index  int
	Kind   LimitKind
	Key    string
	label  string
	tools  []toolpattern.Pattern
	N      int           // count and rate
	Window time.Duration // rate; budget (0: no window)
	Amount float64       // budget
	Over   LimitOver
	Shadow bool
}

// compileLimits validates and compiles the limits of a host policy. Every error is a
// [*PolicyError] whose field names the entry by index and name.
func compileLimits(cfgs []LimitConfig) ([]Limit, error) {
	if len(cfgs) > MaxLimits {
		return nil, &PolicyError{Field: "limits", Msg: fmt.Sprintf("%d limits, more than %d", len(cfgs), MaxLimits)}
	}
	out := make([]Limit, 0, len(cfgs))
	names := make(map[string]int, len(cfgs))
	for i, c := range cfgs {
		field := "limits[" + strconv.Itoa(i) + "]"
		if c.Name != "" {
			field += " (" + c.Name + ")"
		}
		bad := func(sub, format string, args ...any) error {
			f := field
			if sub != "" {
				f += "." + sub
			}
			return &PolicyError{Field: f, Msg: fmt.Sprintf(format, args...)}
		}
		if err := ValidateLimitName(c.Name); err != nil {
			return nil, bad("name", "%v", err)
		}
		if j, dup := names[c.Name]; dup {
			return nil, bad("name", "limits[%d] has the same name", j)
		}
		names[c.Name] = i
		l := Limit{Name: c.Name, Index: i, Key: c.Key, Over: c.Over, Shadow: c.Shadow}
		if len(c.Tools) == 0 {
			return nil, bad("tools", "at least one tool pattern is needed")
		}
		for k, t := range c.Tools {
			pat, err := toolpattern.Parse(t)
			if err != nil {
				return nil, &PolicyError{Field: fmt.Sprintf("%s.tools[%d]", field, k), Msg: err.Error(), Err: err}
			}
			l.tools = append(l.tools, pat)
		}
		switch {
		case c.Key == LimitKeyRun, c.Key == LimitKeyStep, c.Key == LimitKeyThread, c.Key == LimitKeyAgent,
			c.Key == LimitKeyTenant, c.Key == LimitKeyGlobal:
		case strings.HasPrefix(c.Key, LimitKeyLabelPrefix):
			l.label = strings.TrimPrefix(c.Key, LimitKeyLabelPrefix)
			if err := ValidateMetadata(map[string]string{l.label: ""}); err != nil || l.label == "" {
				return nil, bad("key", "label key %q needs a metadata key name of a-z 0-9 _ . -", c.Key)
			}
		case c.Key == "":
			return nil, bad("key", "missing (want run, step, thread, agent, tenant, label:NAME or global)")
		default:
			return nil, bad("key", "unknown key %q (want run, step, thread, agent, tenant, label:NAME or global)", c.Key)
		}
		kinds := 0
		for _, set := range []bool{c.Concurrency != nil, c.Rate != nil, c.Count != nil, c.Budget != nil} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return nil, bad("", "needs exactly one of concurrency, rate, count and budget, has %d", kinds)
		}
		window := func(s string, required bool) (time.Duration, error) {
			if s == "" && !required {
				return 0, nil
			}
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				return 0, fmt.Errorf("unparsable window %q (want a Go duration like 1m)", s)
			case d <= 0:
				return 0, fmt.Errorf("window %q must be > 0", s)
			case d%time.Second != 0:
				return 0, fmt.Errorf("window %q must be a whole number of seconds", s)
			}
			return d, nil
		}
		switch {
		case c.Concurrency != nil:
			l.Kind, l.N = LimitConcurrency, *c.Concurrency
			if l.N <= 0 {
				return nil, bad("concurrency", "%d must be > 0", l.N)
			}
			if c.Shadow {
				// A shadow limit changes no decision, and a concurrency limit's only effect
				// is to hold a call back: there is nothing it could log that it did.
				return nil, bad("shadow", "a concurrency limit cannot be a shadow limit (it only ever makes a call wait)")
			}
		case c.Count != nil:
			l.Kind, l.N = LimitCount, *c.Count
			if l.N <= 0 {
				return nil, bad("count", "%d must be > 0", l.N)
			}
		case c.Rate != nil:
			l.Kind, l.N = LimitRate, c.Rate.N
			if l.N <= 0 {
				return nil, bad("rate.n", "%d must be > 0", l.N)
			}
			w, err := window(c.Rate.Window, true)
			if err != nil {
				return nil, bad("rate.window", "%v", err)
			}
			l.Window = w
		case c.Budget != nil:
			l.Kind, l.Amount = LimitBudget, c.Budget.Amount
			if !(l.Amount > 0) || math.IsInf(l.Amount, 0) {
				return nil, bad("budget.amount", "%v must be > 0", l.Amount)
			}
			w, err := window(c.Budget.Window, false)
			if err != nil {
				return nil, bad("budget.window", "%v", err)
			}
			l.Window = w
		}
		switch {
		case l.Kind == LimitConcurrency && (l.Over == "" || l.Over == LimitOverWait):
			l.Over = LimitOverWait
		case l.Kind == LimitConcurrency:
			return nil, bad("over", "%q does not apply to a concurrency limit (a call over it waits: want wait)", l.Over)
		case l.Over == "":
			l.Over = LimitOverBlock
		case l.Over == LimitOverBlock:
		case l.Over == LimitOverAsk && l.Kind == LimitBudget:
		case l.Over == LimitOverWait && l.Kind == LimitRate:
		default:
			return nil, bad("over", "%q does not apply to a %s limit (want block%s)", l.Over, l.Kind,
				map[LimitKind]string{LimitBudget: " or ask", LimitRate: " or wait"}[l.Kind])
		}
		out = append(out, l)
	}
	return out, nil
}

// ValidateLimitName checks a limit name: 1 to 64 bytes of a-z A-Z 0-9 _ -, so it is a
// metric label and a ledger key part as it stands.
func ValidateLimitName(name string) error {
	if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) >= 0 {
		return fmt.Errorf("name %q must have 1 to 64 bytes of a-z A-Z 0-9 _ -", name)
	}
	return nil
}

// Limits returns the policy's compiled limits, in configuration order.
func (p *Policy) Limits() []Limit {
	if p == nil {
		return nil
	}
	return p.limits
}

// Matches reports whether call is of a tool the limit applies to (a pattern that looks
// at arguments matches only a call whose arguments are a JSON object it matches).
func (l *Limit) Matches(call ToolCall) bool {
	var args *toolpattern.Args
	for _, pat := range l.tools {
		if !pat.MatchesTool(call.ToolID) {
			continue
		}
		if !pat.LooksAtArgs() {
			return true
		}
		if args == nil {
			a, err := toolpattern.DecodeArgs(call.Arguments)
			if err != nil {
				return false
			}
			args = a
		}
		if pat.MatchesArgs(args) {
			return true
		}
	}
	return false
}

// MatchesTool reports whether one of the limit's patterns names toolID, whatever the
// arguments (configuration checks use it: a budget needs a cost on every such tool).
func (l *Limit) MatchesTool(toolID string) bool {
	for _, pat := range l.tools {
		if pat.MatchesTool(toolID) {
			return true
		}
	}
	return false
}

// KeyValue is the value of the limit's key for sub: the run id, "{run}/{step}", the thread
// id, the agent snapshot id, the tenant, the label's metadata value, or "" for global. A
// submission without a tenant (or the label) is accounted under the empty value, with
// every other such submission: a missing key never escapes the limit.
func (l *Limit) KeyValue(sub *BatchSubmission) string {
	switch l.Key {
	case LimitKeyRun:
		return sub.RunID
	case LimitKeyStep:
		return sub.RunID + "/" + strconv.FormatInt(sub.Step, 10)
	case LimitKeyThread:
		return sub.ThreadID
	case LimitKeyAgent:
		return sub.Agent.SnapshotID
	case LimitKeyTenant:
		return sub.Tenant
	case LimitKeyGlobal:
		return ""
	}
	return sub.Metadata[l.label]
}

// WindowStart is the start of the fixed window holding at (the zero time for a limit
// without a window).
func (l *Limit) WindowStart(at time.Time) time.Time {
	if l.Window <= 0 {
		return time.Time{}
	}
	return at.Truncate(l.Window).UTC()
}

// LimitLedgerKey is the ledger key of limit name, key value value and window start (zero:
// no window): {name}.{value, base64url}[.{window start, unix seconds}]. The value is
// encoded so any run id, tenant or label value is a valid KV key token ("_" stands for the
// empty value).
func LimitLedgerKey(name, value string, window time.Time) string {
	v := "_"
	if value != "" {
		v = "v" + base64.RawURLEncoding.EncodeToString([]byte(value))
	}
	k := name + "." + v
	if !window.IsZero() {
		k += "." + strconv.FormatInt(window.Unix(), 10)
	}
	return k
}

// ParseLimitLedgerKey splits a [LimitLedgerKey] into its parts.
func ParseLimitLedgerKey(key string) (name, value string, window time.Time, err error) {
	parts := strings.Split(key, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return "", "", time.Time{}, fmt.Errorf("limit ledger key %q: want name.value[.window]", key)
	}
	name = parts[0]
	if parts[1] != "_" {
		b, derr := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(parts[1], "v"))
		if derr != nil {
			return "", "", time.Time{}, fmt.Errorf("limit ledger key %q: %w", key, derr)
		}
		value = string(b)
	}
	if len(parts) == 3 {
		sec, perr := strconv.ParseInt(parts[2], 10, 64)
		if perr != nil {
			return "", "", time.Time{}, fmt.Errorf("limit ledger key %q: %w", key, perr)
		}
		window = time.Unix(sec, 0).UTC()
	}
	return name, value, window, nil
}

// LimitLedgerEntry is the value of one ledger key: what the limit's key value has used,
// and the shares of the calls still live. Used is the total: the shares of the calls that
// ended having run (spent, folded in) plus every share in Held. Held maps the operation id
// of each call whose share may still change — decided and not ended, so it may be given
// back (it never runs) or settled (its tool reports a cost) — to its amount (1 for
// concurrency, count and rate, the cost for a budget): a redelivered or replayed decision
// finds its operation there and is never counted twice, and an ended call's settlement or
// release finds it there exactly once. A call that ran leaves Held when it ends — at the
// key's next write, or, for a budget its tool reported a cost to, in the write that settles
// it — so the entry's size follows the calls in flight, not the calls it ever counted.
//
// A concurrency limit's entry also queues the calls waiting for a slot (Waiting, in the
// order they asked) and remembers each hand-off (Handed: the operation that gave its slot
// back → the waiter it passed the slot to) until the waiter ends, so a release redelivered
// after a crash finds the waiter it must still hand the call over to.
type LimitLedgerEntry struct {
	Limit string             `json:"limit"`
	Kind  LimitKind          `json:"kind"`
	Key   string             `json:"key"`
	Value string             `json:"value"`
	Held  map[string]float64 `json:"held"`
	Used  float64            `json:"used"`
	// Waiting are the calls waiting for a slot (concurrency), first come first served.
	Waiting []LimitWaiter `json:"waiting,omitempty"`
	// Handed maps an operation that gave its slot back to the waiter it handed it to.
	Handed map[string]LimitWaiter `json:"handed,omitempty"`
	// Deferred maps, in the entry of the window a batch was recorded in, each operation a
	// waiting rate limit deferred to a later window to that window's start (Unix seconds).
	Deferred map[string]int64 `json:"deferred,omitempty"`
	// Window is the start of the entry's window (rate, windowed budget); absent otherwise.
	Window *time.Time `json:"window,omitempty"`
}

// LimitWaiter is a call waiting for a slot of a concurrency limit: its operation id, and
// where its record is (the batch of run RunID at Step, call Index).
type LimitWaiter struct {
	Op    string `json:"op"`
	RunID string `json:"run_id"`
	Step  int64  `json:"step"`
	Index int    `json:"index"`
}

// WaitingIndex returns the position of op among the entry's waiters, or -1.
func (e *LimitLedgerEntry) WaitingIndex(op string) int {
	for i, w := range e.Waiting {
		if w.Op == op {
			return i
		}
	}
	return -1
}

// LimitUse is one ledger entry as GET /v1/limits reports it.
type LimitUse struct {
	Limit string    `json:"limit"`
	Kind  LimitKind `json:"kind"`
	Key   string    `json:"key"`
	Value string    `json:"value"`
	Used  float64   `json:"used"`
	Max   float64   `json:"max"`
	// Waiting counts the calls waiting for a slot (concurrency limits).
	Waiting int        `json:"waiting,omitempty"`
	Shadow  bool       `json:"shadow,omitempty"`
	Window  *time.Time `json:"window,omitempty"`
}

// Max is the limit's ceiling: N for count and rate, Amount for a budget.
func (l *Limit) Max() float64 {
	if l.Kind == LimitBudget {
		return l.Amount
	}
	return float64(l.N)
}

// BlockReason is the model-visible reason of a call the limit holds back:
// "{count_exceeded|rate_limited|budget_exhausted}: limit {name} ({detail})".
func (l *Limit) BlockReason() string {
	switch l.Kind {
	case LimitConcurrency:
		return fmt.Sprintf("%s: limit %s allows %d calls at once per %s", ReasonConcurrencyLimited, l.Name, l.N, l.Key)
	case LimitCount:
		return fmt.Sprintf("%s: limit %s allows %d calls per %s", ReasonCountExceeded, l.Name, l.N, l.Key)
	case LimitRate:
		return fmt.Sprintf("%s: limit %s allows %d calls per %s per %s", ReasonRateLimited, l.Name, l.N, l.Window, l.Key)
	}
	per := "in total"
	if l.Window > 0 {
		per = "per " + l.Window.String()
	}
	return fmt.Sprintf("%s: limit %s allows a cost of %v per %s %s", ReasonBudgetExhausted, l.Name, l.Amount, l.Key, per)
}
