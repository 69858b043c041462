package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/goldentest"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestRenderGolden: the human output of every client command, for fixed inputs, as a
// person reads it on a terminal — aligned tables, short lines, control characters of
// tool-authored text escaped.
func TestRenderGolden(t *testing.T) {
	opened := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	deadline := opened.Add(24 * time.Hour)
	due := opened.Add(2 * time.Second)
	tickets := []contracts.ResumeTicket{
		{CorrelationID: "permission.run-1.1.c1", RunID: "run-1", BatchID: "tool-batch:run-1:1", CallID: "c1", ToolID: "ask_me",
			Reason: contracts.ReasonPermission, Arguments: json.RawMessage(`{"text":"hi"}`), OpenedAt: opened, Deadline: &deadline,
			ArgumentsDigest: contracts.ArgumentsDigest(json.RawMessage(`{"text":"hi"}`)), PolicyDigest: "sha256:policy",
			ApprovalsRequired: 2, Approvals: []contracts.TicketApproval{{Actor: "alice", ResumeID: "r1", At: opened}}},
		{CorrelationID: "schedule.run-1.1.c2", RunID: "run-1", BatchID: "tool-batch:run-1:1", CallID: "c2", ToolID: "later",
			Reason: contracts.ReasonScheduledAction, OpenedAt: opened, DueAt: &due},
	}
	catalog, _ := json.Marshal(contracts.ToolCatalog{Tools: []contracts.CatalogTool{
		{ID: "echo", Description: "Returns its `text` argument as text.", Kind: "regular", Target: "brain", Capability: "replay_safe"},
		{ID: "counter", Description: "Increments a durable counter.", Kind: "regular", Target: "brain", Capability: "non_recoverable",
			Paused: true, Pause: &contracts.ToolPause{ToolID: "counter", Reason: "bad deploy", Actor: "ops"}},
	}})
	results := submitResult{BatchID: "tool-batch:run-1:1", Results: []contracts.ToolResultEvent{
		{Index: 0, CallID: "c1", ToolID: "echo", Outcome: contracts.OutcomeCompleted,
			Output: contracts.ToolOutput{Content: []contracts.ContentBlock{{Type: contracts.BlockText, Text: "hello\n\x1b[31mworld"}}}},
		{Index: 1, CallID: "c2", ToolID: "fail", Outcome: contracts.OutcomeCompleted,
			Output: contracts.ToolOutput{IsError: true, Content: []contracts.ContentBlock{{Type: contracts.BlockText, Text: "boom"}}}},
		{Index: 2, CallID: "c3", ToolID: "counter", Outcome: contracts.OutcomeIndeterminate,
			Output: contracts.ToolOutput{IsError: true, Content: []contracts.ContentBlock{{Type: contracts.BlockText, Text: "indeterminate: crashed mid-call"}}}},
	}, Finalized: contracts.BatchFinalized{BatchID: "tool-batch:run-1:1", RunEnded: &contracts.RunEnded{Reason: "cancelled"}}}

	for _, tc := range []struct {
		name   string
		render func(w *bytes.Buffer) error
	}{
		{"submit", func(w *bytes.Buffer) error { return renderSubmitted(w, "batch.json", "tool-batch:run-1:1", false) }},
		{"submit_wait", func(w *bytes.Buffer) error {
			renderWaiting(w, "tool-batch:run-1:1")
			renderTicketWait(w, tickets[0])
			renderTicketWait(w, tickets[1])
			return renderResults(w, results, false)
		}},
		{"tickets_ls", func(w *bytes.Buffer) error { return renderTickets(w, tickets, false) }},
		{"tickets_ls_empty", func(w *bytes.Buffer) error { return renderTickets(w, nil, false) }},
		{"tickets_show", func(w *bytes.Buffer) error { return renderTicket(w, tickets[0], false) }},
		{"tickets_approve", func(w *bytes.Buffer) error {
			if err := renderResolution(w, contracts.TicketResolution{CorrelationID: tickets[0].CorrelationID, Code: "resumed", Message: "the call runs", Actor: "api-token"}, false); err != nil {
				return err
			}
			return renderResolution(w, contracts.TicketResolution{CorrelationID: tickets[0].CorrelationID, Code: "resumed", Message: "the call runs", Actor: "cli:ada", ActorClaimed: true}, false)
		}},
		{"tools_ls", func(w *bytes.Buffer) error { return renderCatalog(w, "awaken", catalog, false) }},
		{"tools_pause", func(w *bytes.Buffer) error {
			return renderPause(w, contracts.ToolPauseState{ToolID: "counter", Paused: true, Pause: &contracts.ToolPause{Reason: "bad deploy", Actor: "ops"}}, false)
		}},
		{"tools_resume", func(w *bytes.Buffer) error { return renderPause(w, contracts.ToolPauseState{ToolID: "counter"}, false) }},
		{"runs_cancel", func(w *bytes.Buffer) error {
			if err := renderCancel(w, contracts.RunEndedEvent{RunID: "run-1", Reason: contracts.RunEndCancelled, EndedAt: opened}, "budget exhausted", false); err != nil {
				return err
			}
			return renderCancel(w, contracts.RunEndedEvent{RunID: "run-2", Reason: contracts.RunEndStateConflict, Keys: []string{"owner"}, EndedAt: opened}, "budget exhausted", false)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.render(&b); err != nil {
				t.Fatal(err)
			}
			goldentest.Check(t, filepath.Join("testdata", tc.name+".golden"), b.Bytes())
		})
	}
}

// TestBatchFileError: a batch file that is not JSON, or has a field of the wrong type,
// is reported with its file, line and column, and the decoder's error stays wrapped.
func TestBatchFileError(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, want string
		as               any
	}{
		{"syntax", "{\n  \"run_id\": \"r\",\n  \"step\": 1,,\n}\n", ":3:13: not a batch submission: invalid character ','", new(*json.SyntaxError)},
		{"type", "{\n  \"run_id\": \"r\",\n  \"step\": \"one\"\n}\n", ":3:15: not a batch submission: json: cannot unmarshal string", new(*json.UnmarshalTypeError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := Main(context.Background(), []string{"submit", path, "--nats-url", "nats://127.0.0.1:1"}, &out, &errb); code != 1 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if !strings.Contains(errb.String(), path+tc.want) {
				t.Errorf("stderr %q does not say %q", errb.String(), path+tc.want)
			}
			var sub contracts.BatchSubmission
			err := batchFileError(path, []byte(tc.text), json.Unmarshal([]byte(tc.text), &sub))
			if !errors.As(err, tc.as) {
				t.Errorf("%v does not wrap the decoder's error", err)
			}
		})
	}
}

// TestCLIOutputModes runs the client commands against the pipeline: JSON to a pipe (the
// buffer here) and with --json, tables with --json=false; `submit --wait` names the
// ticket a parked batch waits on, and `submit` alone says it only published.
func TestCLIOutputModes(t *testing.T) {
	cfg := parseConfig(t, `storage: {memory: true}
tools:
  - id: echo
  - id: ask_me
    builtin: ran
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask, timeout: 1h }
`)
	ctx := servicetest.Context(t, 2*time.Minute)
	srv, _ := startStack(t, ctx, cfg, append(app.AllServices(), contracts.ServiceAPI)...)
	url := []string{"--nats-url", srv.URL()}
	run := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(ctx, append(args, url...), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String(), errb.String()
	}
	file := func(name string, sub contracts.BatchSubmission) string {
		b, _ := json.Marshal(sub)
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// submit --wait, JSON to a pipe; the table with --json=false.
	echo := file("echo.json", servicetest.Submission("run-out", 1, servicetest.CallJSON("c1", "echo", map[string]string{"text": "hi"})))
	out, errOut := run("submit", echo, "--wait")
	var res submitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Results) != 1 || res.BatchID != "tool-batch:run-out:1" {
		t.Fatalf("submit --wait to a pipe is not its JSON document: %v\n%s", err, out)
	}
	if !strings.Contains(errOut, "waiting for the results of tool-batch:run-out:1") {
		t.Errorf("submit --wait did not say what it waits for: %q", errOut)
	}
	out, _ = run("submit", echo, "--wait", "--json=false")
	if !strings.Contains(out, "batch tool-batch:run-out:1 published: 1 results") || !strings.Contains(out, "c1    echo  completed  hi") {
		t.Errorf("submit --wait --json=false:\n%s", out)
	}

	// submit alone: published only, and how to learn more.
	out, _ = run("submit", file("two.json", servicetest.Submission("run-out", 2, servicetest.CallJSON("c1", "echo", map[string]string{"text": "x"}))))
	var pub map[string]string
	if err := json.Unmarshal([]byte(out), &pub); err != nil || pub["batch_id"] != "tool-batch:run-out:2" || !strings.Contains(pub["note"], "published only") {
		t.Errorf("submit: %v %s", err, out)
	}

	// A batch parked on approval: --wait names the ticket, and goes on once it is approved.
	ask := file("ask.json", servicetest.Submission("run-ask", 1, servicetest.CallJSON("c1", "ask_me", map[string]string{})))
	var waitOut, waitErr natstest.SyncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Main(ctx, append([]string{"submit", ask, "--wait", "--json=false"}, url...), &waitOut, &waitErr)
	}()
	natstest.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(waitErr.String(), "waiting on ticket ") },
		"submit --wait to name the ticket")
	out, _ = run("tickets", "ls")
	var ts []contracts.ResumeTicket
	if err := json.Unmarshal([]byte(out), &ts); err != nil || len(ts) != 1 {
		t.Fatalf("tickets ls to a pipe: %v\n%s", err, out)
	}
	if !strings.Contains(waitErr.String(), "waiting on ticket "+ts[0].CorrelationID+": call c1 (ask_me) needs approval") {
		t.Errorf("submit --wait: %q", waitErr.String())
	}
	out, _ = run("tickets", "ls", "--json=false")
	if !strings.HasPrefix(out, "TICKET ") || !strings.Contains(out, ts[0].CorrelationID) {
		t.Errorf("tickets ls --json=false:\n%s", out)
	}
	out, _ = run("tickets", "approve", ts[0].CorrelationID, "--json=false", "--as", "ada")
	if !strings.HasPrefix(out, "ticket "+ts[0].CorrelationID+": ") {
		t.Errorf("tickets approve --json=false: %q", out)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("submit --wait: exit %d: %s", code, waitErr.String())
		}
	case <-ctx.Done():
		t.Fatal("submit --wait did not end after the approval")
	}
	if !strings.Contains(waitOut.String(), "c1    ask_me  completed") {
		t.Errorf("submit --wait after the approval:\n%s", waitOut.String())
	}

	// tools ls: JSON with --json even where the table would be the default, the table
	// with --json=false.
	out, _ = run("tools", "ls", "--json")
	var cat contracts.ToolCatalog
	if err := json.Unmarshal([]byte(out), &cat); err != nil || len(cat.Tools) != 2 {
		t.Errorf("tools ls --json: %v\n%s", err, out)
	}
	out, _ = run("tools", "ls", "--json=false")
	if !strings.HasPrefix(out, "TOOL ") || !strings.Contains(out, "ask_me") {
		t.Errorf("tools ls --json=false:\n%s", out)
	}

	// runs cancel returns once the run has ended: the next step, submitted at once, is
	// refused.
	out, _ = run("runs", "cancel", "run-out", "--reason", "done here")
	var ended map[string]any
	if err := json.Unmarshal([]byte(out), &ended); err != nil || ended["status"] != "ended" || ended["reason"] != "done here" || ended["end"] != contracts.RunEndCancelled {
		t.Fatalf("runs cancel: %v %s", err, out)
	}
	var out3, err3 bytes.Buffer
	three := file("three.json", servicetest.Submission("run-out", 3, servicetest.CallJSON("c1", "echo", map[string]string{"text": "late"})))
	if code := Main(ctx, append([]string{"submit", three, "--wait"}, url...), &out3, &err3); code == 0 || !strings.Contains(err3.String(), "run_cancelled") {
		t.Errorf("submit after runs cancel: exit %d, stderr %q, want run_cancelled", code, err3.String())
	}
}

// TestRenderResolutionSaysEachWordOnce: the line of a ticket decision says the gate's code
// once, with what the message adds to it — not "approved — approved" or
// "denied — denied: denied" (the gate's messages repeat the code).
func TestRenderResolutionSaysEachWordOnce(t *testing.T) {
	for _, tc := range []struct{ code, message, want string }{
		{"approved", "approved", "ticket t1: approved (by ada)"},
		{"approved", "approved with edited arguments", "ticket t1: approved with edited arguments (by ada)"},
		{"denied", "denied: denied", "ticket t1: denied (by ada)"},
		{"denied", "denied: too risky", "ticket t1: denied: too risky (by ada)"},
		{"denied", "blocked: tool_paused: bad deploy", "ticket t1: denied — blocked: tool_paused: bad deploy (by ada)"},
		{"approval_recorded", "approval 1 of 2 recorded; the ticket stays open until the last", "ticket t1: approval_recorded — approval 1 of 2 recorded; the ticket stays open until the last (by ada)"},
	} {
		var b bytes.Buffer
		if err := renderResolution(&b, contracts.TicketResolution{CorrelationID: "t1", Code: tc.code, Message: tc.message, Actor: "ada"}, false); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSuffix(b.String(), "\n"); got != tc.want {
			t.Errorf("code %q message %q: %q, want %q", tc.code, tc.message, got, tc.want)
		}
	}
}
