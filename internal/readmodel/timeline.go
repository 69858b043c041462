package readmodel

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// maxOutcomeText bounds the output text shown per call in a timeline.
const maxOutcomeText = 72

// WriteTimeline prints b for a terminal (`awaken batch show`): a header, one line per call
// with its phase and outcome, then every committed stage of every call with its time and
// its offset from the batch's creation. Tool- and model-authored text is shown with control
// characters escaped, so an output cannot move the cursor or recolour the terminal.
func WriteTimeline(w io.Writer, b httpapi.BatchView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("batch\t%s\n", b.BatchID)
	p("run\t%s (thread %s, step %d)\n", b.RunID, b.ThreadID, b.Step)
	p("phase\t%s (%d of %d calls terminal)\n", b.Phase, b.Terminal, len(b.Calls))
	p("created\t%s\n", stamp(b.CreatedAt))
	p("\n")
	p("#\tCALL\tTOOL\tPHASE\tOUTCOME\tDECIDED BY\n")
	for _, c := range b.Calls {
		p("%d\t%s\t%s\t%s\t%s\t%s\n", c.Index, c.CallID, c.ToolID, phaseText(c), outcomeText(c), deciderText(c))
	}
	p("\n")
	for _, c := range b.Calls {
		if c.ProposedArguments != nil {
			p("%d\t%s\tproposed arguments\t%s\n", c.Index, c.CallID, clean(string(c.ProposedArguments), 200))
			p("%d\t%s\tapproved arguments\t%s\n", c.Index, c.CallID, clean(string(c.Arguments), 200))
			p("\n")
		}
	}
	p("#\tCALL\tSTAGE\tTIME\tSINCE CREATED\n")
	for _, c := range b.Calls {
		if len(c.Timeline) == 0 {
			p("%d\t%s\t%s\t-\t-\n", c.Index, c.CallID, "(not gated yet)")
			continue
		}
		for _, m := range c.Timeline {
			p("%d\t%s\t%s\t%s\t%s\n", c.Index, c.CallID, clean(m.Stage, 40), stamp(m.At), since(b.CreatedAt, m.At))
		}
	}
	return tw.Flush()
}

// deciderText says who resolved the call's ticket — "alice (claimed)" for an actor no
// door authenticated — and whether the approval edited the arguments ("-" for a call no
// ticket held).
func deciderText(c httpapi.CallView) string {
	if c.Actor == "" && !c.ActorClaimed {
		return "-"
	}
	s := contracts.ActorText(clean(c.Actor, 64), c.ActorClaimed)
	if c.Edited {
		s += " (edited arguments)"
	}
	return s
}

func phaseText(c httpapi.CallView) string {
	switch {
	case c.Phase == "Executing" && c.Attempt > 0:
		return fmt.Sprintf("Executing (attempt %d)", c.Attempt)
	case c.Phase == "Awaiting" && c.Wait != nil:
		return fmt.Sprintf("Awaiting %s (%s)", c.Wait.Kind, c.Wait.CorrelationID)
	}
	return string(c.Phase)
}

func outcomeText(c httpapi.CallView) string {
	if c.Outcome == "" {
		return "-"
	}
	s := string(c.Outcome)
	if c.IsError {
		s += " (error)"
	}
	switch {
	case c.Reason != "":
		s += ": " + clean(c.Reason, maxOutcomeText)
	case c.Output != nil:
		if t := cmp.Or(c.Output.Text(), c.Output.LinkText()); t != "" {
			s += ": " + clean(t, maxOutcomeText)
		}
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func since(from, t time.Time) string {
	if from.IsZero() || t.IsZero() {
		return "-"
	}
	d := t.Sub(from).Round(time.Millisecond)
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// clean makes s safe and short for one terminal cell: control characters (newlines, tabs,
// escape sequences) are shown escaped, and s is cut to max runes with an ellipsis.
func clean(s string, max int) string {
	var b strings.Builder
	n := 0
	for i, r := range s {
		if n == max {
			if i < len(s) {
				b.WriteString("…")
			}
			break
		}
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}

// CleanCell is the escaping and cutting of [WriteTimeline]'s cells, for the CLI's other
// terminal tables: tool- and model-authored text never reaches a terminal raw.
func CleanCell(s string, max int) string { return clean(s, max) }
