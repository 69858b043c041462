package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Retention is the `retention:` section: how long each kind of record is kept
// (docs/operations.md, "Data lifecycle"). Each value is a duration ("90s", "72h", or whole
// days, "30d") or, for the kinds that allow it, "forever". A kind left out takes Default,
// and Default left out takes each kind's built-in period ([RetentionKinds]).
type Retention struct {
	// Default is the period of every kind not named below.
	Default string `yaml:"default"`
	// Runs is how long a finished run's records are kept: its batch, call and ticket
	// records, the run control and ticket protocol logs. The run record itself, the run's
	// exactly-once marker, is kept one period longer.
	Runs string `yaml:"runs"`
	// Results is how long the results stream and the large outputs it links to are kept.
	Results string `yaml:"results"`
	// Submissions is how long the submissions stream is kept.
	Submissions string `yaml:"submissions"`
	// Events is how long the agent-event projection is kept.
	Events string `yaml:"events"`
	// Audit is how long the audit trail is kept ("forever" allowed).
	Audit string `yaml:"audit"`
	// DeadLetters is how long refused and exhausted messages are kept ("forever" allowed).
	DeadLetters string `yaml:"dead_letters"`
}

// Forever is the retention value that keeps records without an age limit.
const Forever = "forever"

// RetentionKind is one kind of record of the `retention:` section.
type RetentionKind struct {
	// Name is the key in the section.
	Name string
	// Builtin is the period when neither the kind nor retention.default is set; 0 is
	// forever.
	Builtin time.Duration
	// ForeverAllowed says whether "forever" may be configured: only for the records of
	// what happened (audit, dead letters), never for working data whose growth is the cost
	// of every call.
	ForeverAllowed bool
	field          func(*Retention) *string
}

// The kinds of the section, in the order the documentation lists them.
const (
	RetentionRuns        = "runs"
	RetentionResults     = "results"
	RetentionSubmissions = "submissions"
	RetentionEvents      = "events"
	RetentionAudit       = "audit"
	RetentionDeadLetters = "dead_letters"
)

const day = 24 * time.Hour

// RetentionKinds lists every kind of record the section bounds.
var RetentionKinds = []RetentionKind{
	{RetentionRuns, 7 * day, false, func(r *Retention) *string { return &r.Runs }},
	{RetentionResults, 7 * day, false, func(r *Retention) *string { return &r.Results }},
	{RetentionSubmissions, 7 * day, false, func(r *Retention) *string { return &r.Submissions }},
	{RetentionEvents, 7 * day, false, func(r *Retention) *string { return &r.Events }},
	{RetentionAudit, 0, true, func(r *Retention) *string { return &r.Audit }},
	{RetentionDeadLetters, 30 * day, true, func(r *Retention) *string { return &r.DeadLetters }},
}

// MinRetention is the shortest period accepted: the server's subject delete markers and
// per-message TTLs count whole seconds.
const MinRetention = time.Second

// UnmarshalYAML decodes the section strictly, so that a misspelt kind is refused with
// the field it names and the kinds there are, rather than silently keeping a default.
func (r *Retention) UnmarshalYAML(node *yaml.Node) error {
	var raw map[string]string
	if err := node.Decode(&raw); err != nil {
		return &FieldError{"retention", "want a map of kind to period: " + err.Error()}
	}
	*r = Retention{}
	for k, v := range raw {
		if k == "default" {
			r.Default = v
			continue
		}
		i := slices.IndexFunc(RetentionKinds, func(kind RetentionKind) bool { return kind.Name == k })
		if i < 0 {
			return &FieldError{"retention." + k, "unknown kind; the kinds are default, " + kindNames()}
		}
		*RetentionKinds[i].field(r) = v
	}
	return nil
}

func kindNames() string {
	names := make([]string, len(RetentionKinds))
	for i, k := range RetentionKinds {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}

// parseRetention parses one value: 0 and true for "forever".
func parseRetention(field, v string, foreverAllowed bool) (time.Duration, error) {
	if v == Forever {
		if !foreverAllowed {
			return 0, &FieldError{field, `"forever" is allowed only for audit and dead_letters: set a duration`}
		}
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil {
			return 0, &FieldError{field, fmt.Sprintf("%q: want a duration such as 90s, 72h or 30d, or forever", v)}
		}
		d = time.Duration(n) * day
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, &FieldError{field, fmt.Sprintf("%q: want a duration such as 90s, 72h or 30d, or forever", v)}
		}
	}
	if d < MinRetention {
		return 0, &FieldError{field, fmt.Sprintf("%q: must be at least %s", v, MinRetention)}
	}
	return d, nil
}

func (r *Retention) validate() error {
	if r.Default != "" {
		if _, err := parseRetention("retention.default", r.Default, false); err != nil {
			return err
		}
	}
	for _, k := range RetentionKinds {
		if v := *k.field(r); v != "" {
			if _, err := parseRetention("retention."+k.Name, v, k.ForeverAllowed); err != nil {
				return err
			}
		}
	}
	return nil
}

// RetentionOf is how long records of kind are kept: the kind's value, else
// retention.default, else the built-in period; 0 is forever. An unknown kind panics: the
// kinds are a closed list the code names.
func (c *Config) RetentionOf(kind string) time.Duration {
	i := slices.IndexFunc(RetentionKinds, func(k RetentionKind) bool { return k.Name == kind })
	if i < 0 {
		panic("config: unknown retention kind " + kind)
	}
	k := RetentionKinds[i]
	v := *k.field(&c.Retention)
	if v == "" {
		v = c.Retention.Default
	}
	if v == "" {
		return k.Builtin
	}
	// Validated by Parse; a Config built in code with a bad value keeps the built-in one.
	d, err := parseRetention("retention."+kind, v, k.ForeverAllowed)
	if err != nil {
		return k.Builtin
	}
	return d
}
