package cli

// The client commands' output for people and for scripts. Every listing command takes
// --json; without it, output to a terminal is a table or a short line and output to
// anything else (a pipe, a file) is JSON, so `awaken tickets ls | jq` needs no flag. The
// command functions only pick what to show; this file decides how it looks.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/awaken-dev/awaken/internal/readmodel"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// isTerminal reports whether w is a terminal: a person reads it.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// jsonFlag declares --json on fs: JSON output, the default when stdout is not a terminal
// (--json=false prints the table to a pipe too).
func jsonFlag(fs *flag.FlagSet, stdout io.Writer) *bool {
	return fs.Bool("json", !isTerminal(stdout), "print JSON (the default when stdout is not a terminal; --json=false prints the table)")
}

// table writes aligned columns; cells are escaped and cut by [readmodel.CleanCell].
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		cells[i] = readmodel.CleanCell(c, 80)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// stampOf formats a time for a table: UTC to the second, "-" when unset.
func stampOf(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// renderSubmitted prints what `awaken submit` without --wait did: it published the batch
// and nothing more — the batcher may still refuse it (conflict, invalid) — and how to
// learn the outcome.
func renderSubmitted(w io.Writer, file, batchID string, asJSON bool) error {
	note := fmt.Sprintf("published only: the batcher may still refuse it; `awaken submit %s --wait` waits for the results, `awaken batch show %s` shows its state", file, batchID)
	if asJSON {
		return printJSON(w, map[string]string{"batch_id": batchID, "note": note})
	}
	_, err := fmt.Fprintf(w, "published %s\n%s\n", batchID, note)
	return err
}

// renderWaiting says on stderr which batch `submit --wait` waits for; stdout keeps only
// the results.
func renderWaiting(w io.Writer, batchID string) {
	fmt.Fprintf(w, "waiting for the results of %s (Ctrl-C stops waiting, not the batch)\n", batchID)
}

// renderTicketWait says which ticket holds a batch `submit --wait` waits for, and how to
// resolve it.
func renderTicketWait(w io.Writer, t contracts.ResumeTicket) {
	switch t.Reason {
	case contracts.ReasonPermission:
		fmt.Fprintf(w, "waiting on ticket %s: call %s (%s) needs approval — awaken tickets approve|deny %s\n",
			t.CorrelationID, t.CallID, readmodel.CleanCell(t.ToolID, 64), t.CorrelationID)
	case contracts.ReasonScheduledAction:
		fmt.Fprintf(w, "waiting on ticket %s: call %s (%s) is scheduled for %s\n",
			t.CorrelationID, t.CallID, readmodel.CleanCell(t.ToolID, 64), stampOf(t.DueAt))
	default:
		fmt.Fprintf(w, "waiting on ticket %s: call %s (%s) is %s — awaken tickets show %s\n",
			t.CorrelationID, t.CallID, readmodel.CleanCell(t.ToolID, 64), t.Reason, t.CorrelationID)
	}
}

// submitResult is `awaken submit --wait`'s JSON document.
type submitResult struct {
	BatchID   string                      `json:"batch_id"`
	Results   []contracts.ToolResultEvent `json:"results"`
	Finalized contracts.BatchFinalized    `json:"finalized"`
}

// renderResults prints a published batch: one row per call in model order, then whether
// the run ended with it.
func renderResults(w io.Writer, r submitResult, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "batch %s published: %d results\n", r.BatchID, len(r.Results))
	t := newTable(w, "#", "CALL", "TOOL", "OUTCOME", "OUTPUT")
	for _, res := range r.Results {
		t.row(fmt.Sprint(res.Index), res.CallID, res.ToolID, string(res.Outcome), outputText(res.Output))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if e := r.Finalized.RunEnded; e != nil {
		msg := "run ended: " + readmodel.CleanCell(e.Reason, 200)
		if len(e.Keys) > 0 {
			msg += " (keys " + readmodel.CleanCell(strings.Join(e.Keys, ", "), 200) + ")"
		}
		fmt.Fprintln(w, msg)
	}
	return nil
}

// outputText is a tool output on one line: its text blocks, a placeholder for the others,
// "error: " first when the output is an error.
func outputText(o contracts.ToolOutput) string {
	parts := make([]string, 0, len(o.Content))
	for _, b := range o.Content {
		switch b.Type {
		case contracts.BlockText:
			parts = append(parts, b.Text)
		case contracts.BlockResourceLink:
			parts = append(parts, "["+b.URI+"]")
		default:
			parts = append(parts, "["+string(b.Type)+"]")
		}
	}
	s := strings.Join(parts, " ")
	if o.IsError {
		s = "error: " + s
	}
	return s
}

// renderTickets prints the open tickets, oldest first.
func renderTickets(w io.Writer, ts []contracts.ResumeTicket, asJSON bool) error {
	if asJSON {
		return printJSON(w, ts)
	}
	if len(ts) == 0 {
		_, err := fmt.Fprintln(w, "no open tickets")
		return err
	}
	t := newTable(w, "TICKET", "TOOL", "REASON", "BATCH", "CALL", "OPENED", "DUE/DEADLINE")
	for _, tk := range ts {
		when := stampOf(tk.Deadline)
		if tk.DueAt != nil {
			when = stampOf(tk.DueAt)
		}
		t.row(tk.CorrelationID, tk.ToolID, string(tk.Reason), tk.BatchID, tk.CallID, stampOf(&tk.OpenedAt), when)
	}
	return t.flush()
}

// renderTicket prints one ticket, a field per line.
func renderTicket(w io.Writer, tk contracts.ResumeTicket, asJSON bool) error {
	if asJSON {
		return printJSON(w, tk)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range [][2]string{
		{"ticket", tk.CorrelationID}, {"reason", string(tk.Reason)}, {"tool", tk.ToolID},
		{"batch", tk.BatchID}, {"call", tk.CallID}, {"run", tk.RunID}, {"thread", tk.ThreadID},
		{"opened", stampOf(&tk.OpenedAt)}, {"due", stampOf(tk.DueAt)}, {"deadline", stampOf(tk.Deadline)},
		{"arguments", string(tk.Arguments)}, {"arguments_digest", tk.ArgumentsDigest},
		{"policy_digest", tk.PolicyDigest}, {"approvals", approvalsText(tk)},
	} {
		v := f[1]
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\n", f[0], readmodel.CleanCell(v, 400))
	}
	return tw.Flush()
}

// approvalsText is "1 of 2: alice" for a ticket that needs several approvals, "" else.
func approvalsText(tk contracts.ResumeTicket) string {
	if tk.Required() <= 1 {
		return ""
	}
	names := make([]string, len(tk.Approvals))
	for i, a := range tk.Approvals {
		names[i] = a.Actor
	}
	text := fmt.Sprintf("%d of %d", len(tk.Approvals), tk.Required())
	if len(names) > 0 {
		text += ": " + strings.Join(names, ", ")
	}
	return text
}

// resolutionText is a decision's code with what its message adds: the gate's messages
// often start with the code ("approved", "denied: {reason}", where the reason of a deny
// without one is "denied"), which is said once.
func resolutionText(code, message string) string {
	switch {
	case message == "" || message == code:
		return code
	case strings.HasPrefix(message, code+": "):
		if rest := message[len(code)+2:]; rest != code && rest != "" {
			return code + ": " + rest
		}
		return code
	case strings.HasPrefix(message, code+" "):
		return message
	}
	return code + " — " + message
}

// renderResolution prints what a ticket decision did.
func renderResolution(w io.Writer, r contracts.TicketResolution, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	line := fmt.Sprintf("ticket %s: %s", r.CorrelationID, resolutionText(r.Code, readmodel.CleanCell(r.Message, 200)))
	if r.ApprovalsRequired > 1 {
		line += fmt.Sprintf(" (%d of %d approvals)", r.Approvals, r.ApprovalsRequired)
	}
	if r.Actor != "" {
		who := readmodel.CleanCell(r.Actor, 64)
		if r.ActorClaimed { // no door authenticated the name: say so, as batch show does
			who += " (claimed)"
		}
		line += " (by " + who + ")"
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// renderCatalog prints `tools ls`: the awaken format as a table for a person; the openai
// and mcp formats are documents for a program, so they are always JSON.
func renderCatalog(w io.Writer, format string, doc json.RawMessage, asJSON bool) error {
	if asJSON || (format != "" && format != "awaken") {
		return printJSON(w, doc)
	}
	var cat contracts.ToolCatalog
	if err := json.Unmarshal(doc, &cat); err != nil {
		return fmt.Errorf("tool catalog: %w", err)
	}
	t := newTable(w, "TOOL", "KIND", "TARGET", "CAPABILITY", "STATE", "DESCRIPTION")
	for _, tool := range cat.Tools {
		state := "ready"
		if tool.Paused {
			state = "paused"
			if tool.Pause != nil && tool.Pause.Reason != "" {
				state += ": " + tool.Pause.Reason
			}
		}
		t.row(tool.ID, string(tool.Kind), string(tool.Target), string(tool.Capability), state, tool.Description)
	}
	return t.flush()
}

// renderPause prints a tool's pause state after pause or resume.
func renderPause(w io.Writer, st contracts.ToolPauseState, asJSON bool) error {
	if asJSON {
		return printJSON(w, st)
	}
	if !st.Paused || st.Pause == nil {
		_, err := fmt.Fprintf(w, "tool %s is not paused: its calls run\n", readmodel.CleanCell(st.ToolID, 64))
		return err
	}
	line := fmt.Sprintf("tool %s is paused: its new calls are blocked", readmodel.CleanCell(st.ToolID, 64))
	if st.Pause.Reason != "" {
		line += " (" + readmodel.CleanCell(st.Pause.Reason, 200) + ")"
	}
	if st.Pause.Actor != "" {
		line += " by " + readmodel.CleanCell(st.Pause.Actor, 64)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// renderCancel prints that a run ended: by this cancellation, or earlier for another
// reason it keeps.
func renderCancel(w io.Writer, ended contracts.RunEndedEvent, reason string, asJSON bool) error {
	reason = readmodel.CleanCell(reason, 200)
	if asJSON {
		// The api's answer (httpapi.CancelResult): the reason given, and how the run ended.
		return printJSON(w, map[string]any{"run_id": ended.RunID, "status": "ended", "reason": reason, "end": ended.Reason,
			"keys": ended.Keys, "ended_at": ended.EndedAt})
	}
	if ended.Reason == contracts.RunEndCancelled {
		_, err := fmt.Fprintf(w, "run %s cancelled (%s) at %s: its open batch is sealed (unfinished calls end indeterminate), later batches are refused\n",
			ended.RunID, reason, ended.EndedAt.UTC().Format(time.RFC3339))
		return err
	}
	_, err := fmt.Fprintf(w, "run %s had already ended (%s) at %s: later batches are refused\n",
		ended.RunID, ended.Reason, ended.EndedAt.UTC().Format(time.RFC3339))
	return err
}

// batchFileError says where a batch file fails to decode: file:line:column for a syntax
// or type error, the file otherwise. The decoder's error stays wrapped (errors.As finds
// the *json.SyntaxError).
func batchFileError(file string, data []byte, err error) error {
	var off int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	}
	if off < 0 {
		return fmt.Errorf("%s: not a batch submission: %w", file, err)
	}
	line, col := lineCol(data, off)
	return fmt.Errorf("%s:%d:%d: not a batch submission: %w", file, line, col, err)
}

// lineCol converts a byte offset of data to a 1-based line and column (in bytes). The
// decoder's offset is just past the byte that failed, so the column points at it.
func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col = 1, 1
	for _, b := range data[:max(off-1, 0)] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
