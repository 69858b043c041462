package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/policybacktest"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

const policyUsage = "awaken policy test --config NEW.yaml [--since T] [--until T] [--run RUN_ID]... [--json]"

// policyTestCommand implements `awaken policy test`: the backtest of a candidate host policy
// against the decisions the audit stream recorded ([policybacktest.Tester]). It reads the
// audit stream and the run and batches buckets directly, as `batch show` does, so a long
// history is not bound by a request's size; POST /v1/policy/test is the same test over
// HTTP.
func policyTestCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout := io.stdout
	connect := dialClient(fs)
	cfgPath := fs.String("config", "", "the candidate host configuration (YAML or JSON) whose policy replays the recorded decisions")
	var since, until *time.Time
	fs.Func("since", "replay decisions made at or after T (RFC 3339, or a duration ago: 24h)", timeFlag(&since))
	fs.Func("until", "replay decisions made at or before T (RFC 3339, or a duration ago)", timeFlag(&until))
	var runs []string
	fs.Func("run", "replay this run's decisions only (repeat for several runs)", func(s string) error {
		runs = append(runs, s)
		return nil
	})
	asJSON := jsonFlag(fs, stdout)
	return func(ctx context.Context, _ []string) error {
		if *cfgPath == "" || fs.NArg() != 0 {
			return &usageError{"usage: " + policyUsage}
		}
		// The file is read here and parsed like the api parses a POSTed one, so both doors
		// refuse a bad candidate with the same words.
		text, err := os.ReadFile(*cfgPath)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		cand, err := policybacktest.ParseConfig(string(text))
		if err != nil {
			return fmt.Errorf("%s: %w", *cfgPath, err)
		}
		c, ctx, done, err := connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		var annotations config.AnnotationSource
		if cand.TrustsAnnotations() {
			view, err := pipeline.WatchAnnotations(ctx, ctx, c.js, c.Names(), zerolog.Nop())
			if err != nil {
				return err
			}
			annotations = view
		}
		pt, err := policybacktest.Open(ctx, c.js, c.Names(), annotations)
		if err != nil {
			return err
		}
		rep, err := pt.Run(ctx, cand, httpapi.PolicyTestRequest{Since: since, Until: until, Runs: runs})
		if err != nil {
			return err
		}
		return renderPolicyTest(stdout, rep, *asJSON)
	}
}

// timeFlag parses an RFC 3339 time, or a duration meaning that long before now, into *dst.
func timeFlag(dst **time.Time) func(string) error {
	return func(s string) error {
		if d, err := time.ParseDuration(s); err == nil {
			t := time.Now().UTC().Add(-d)
			*dst = &t
			return nil
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
		}
		*dst = &t
		return nil
	}
}

// renderPolicyTest prints a backtest: one row per replayed decision (old and new), the
// counts per rule of the candidate, then the totals and what bounds them.
func renderPolicyTest(w io.Writer, rep httpapi.PolicyTestReport, asJSON bool) error {
	if asJSON {
		return printJSON(w, rep)
	}
	if rep.Total == 0 {
		_, err := fmt.Fprintln(w, "no recorded gate decisions match (the audit stream's retention bounds the history)")
		return err
	}
	t := newTable(w, "BATCH", "CALL", "TOOL", "OLD", "NEW", "CHANGED", "RULE")
	for _, c := range rep.Calls {
		changed, rule := "", c.Rule
		if c.Changed {
			changed = "yes"
		}
		if c.Missing != "" {
			rule = "not replayed: " + c.Missing
		}
		t.row(c.BatchID, c.CallID, c.ToolID, c.Old, c.New, changed, rule)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "RULE", "CALLS", "CHANGED")
	for _, r := range rep.Rules {
		name := r.Rule
		if r.Shadow {
			name += " (shadow)"
		}
		t.row(name, fmt.Sprint(r.Calls), fmt.Sprint(r.Changed))
	}
	if err := t.flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("%d decisions replayed, %d changed", rep.Total, rep.Changed)
	if rep.Missing > 0 {
		summary += fmt.Sprintf(", %d not replayed", rep.Missing)
	}
	if rep.Oldest != nil {
		summary += "; oldest " + stampOf(rep.Oldest) + " (the audit stream's retention bounds the history)"
	}
	_, err := fmt.Fprintln(w, strings.TrimSpace(summary))
	return err
}
