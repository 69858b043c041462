package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const rejectionTestConfig = `
tools:
  - id: ask_me
    builtin: ran
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask }
`

// A conflicting submission that names the same batch id is rejected under its own event
// id; the valid submission, accepted and run, is not reported rejected by SubmitAndWait.
// The real batcher, gate, brain-exec and publisher on an embedded server: the valid batch
// parks on an approval, so the conflicting one is rejected while SubmitAndWait waits.
func TestSubmitAndWaitIgnoresTheRejectionOfAnotherSubmissionOfTheSameBatch(t *testing.T) {
	cfg := servicetest.ParseConfig(t, rejectionTestConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := stacktest.NewServer(t)
	srv.StartStack(ctx, app.Options{Config: cfg, Services: []string{contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceGate, contracts.ServiceBatcher}})
	nc, c := srv.NC, srv.Client
	rejections := servicetest.Rejections(t, nc, contracts.NewNames(c.Prefix()))

	valid := contracts.BatchSubmission{RunID: "run-same-id", ThreadID: "thread-1", Step: 1,
		Agent:     contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"ask_me", "echo"}},
		Narrowing: contracts.NarrowingConfigured,
		Calls:     []contracts.ToolCall{{CallID: "c1", ToolID: "ask_me", Arguments: json.RawMessage(`{}`)}}}
	type waited struct {
		res *client.BatchResult
		err error
	}
	done := make(chan waited, 1)
	go func() {
		res, err := c.SubmitAndWait(ctx, valid)
		done <- waited{res, err}
	}()
	ticket, err := c.WaitTicket(ctx, valid.RunID, valid.Step, "c1")
	if err != nil {
		t.Fatal(err)
	}

	conflicting := valid
	conflicting.Calls = []contracts.ToolCall{{CallID: "c1", ToolID: "echo", Arguments: json.RawMessage(`{"text":"other"}`)}}
	if _, err := c.Submit(ctx, conflicting); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-rejections:
		if r.Code != string(contracts.RejectConflict) || r.BatchID != valid.BatchID() || r.EventID != client.SubmissionEventID(conflicting) {
			t.Fatalf("rejection %+v, want a conflict of %s under the conflicting submission's event id %s",
				r, valid.BatchID(), client.SubmissionEventID(conflicting))
		}
	case <-ctx.Done():
		t.Fatal("the conflicting submission was not rejected")
	}
	// SubmitAndWait saw that rejection (its subscription was in place before its own
	// submission); it must still be waiting for the approval.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Approve(ctx, ticket, "ok"); err != nil {
		t.Fatal(err)
	}
	var w waited
	select {
	case w = <-done:
	case <-ctx.Done():
		t.Fatal("SubmitAndWait did not return")
	}
	if w.err != nil {
		var rej *client.RejectedError
		if errors.As(w.err, &rej) {
			t.Fatalf("the accepted batch was reported rejected: %+v", rej.BatchRejected)
		}
		t.Fatal(w.err)
	}
	if w.res.BatchID != valid.BatchID() || len(w.res.Results) != 1 || w.res.Results[0].ToolID != "ask_me" ||
		w.res.Results[0].Outcome != contracts.OutcomeCompleted {
		t.Fatalf("results %+v, want the approved ask_me", w.res)
	}
}

// natsPubExample is the `nats pub` command of docs/integration.md: its subject, its -H
// headers in order and its body, read from the document so the test runs what a reader
// copies.
func natsPubExample(t *testing.T) (subject string, headers [][2]string, body string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/integration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```sh\nnats pub ")
	if !ok {
		t.Fatal("docs/integration.md has no ```sh block starting with nats pub")
	}
	block, _, _ := strings.Cut(rest, "```")
	// Shell words: arguments separated by blanks and backslash-newlines, single-quoted
	// ones taken verbatim.
	var words []string
	for s := strings.ReplaceAll(block, "\\\n", " "); ; {
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			break
		}
		var w string
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				t.Fatalf("unterminated quote in the nats pub example: %s", s)
			}
			w, s = s[1:end+1], s[end+2:]
		} else {
			end := strings.IndexAny(s, " \t\n")
			if end < 0 {
				end = len(s)
			}
			w, s = s[:end], s[end:]
		}
		words = append(words, w)
	}
	subject = words[0]
	for i := 1; i < len(words); i++ {
		if words[i] == "-H" && i+1 < len(words) {
			k, v, _ := strings.Cut(words[i+1], ":")
			headers = append(headers, [2]string{k, v})
			i++
			continue
		}
		body = words[i]
	}
	return subject, headers, body
}

// TestDocumentedNatsPubExample publishes the `nats pub` example of docs/integration.md —
// its headers and body, on its subject — to the real pipeline and reads its results; the
// same body published without headers is refused missing_cloudevent_headers (naming the
// headers it needs) and dead-lettered, not taken for a structured CloudEvent whose fields
// are attributes.
func TestDocumentedNatsPubExample(t *testing.T) {
	cfg := servicetest.ParseConfig(t, rejectionTestConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := stacktest.NewServer(t)
	srv.StartStack(ctx, app.Options{Config: cfg, Services: []string{contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceGate, contracts.ServiceBatcher}})
	nc, c := srv.NC, srv.Client
	rejections := servicetest.Rejections(t, nc, contracts.NewNames(c.Prefix()))

	subject, headers, body := natsPubExample(t)
	if subject != contracts.NewNames(c.Prefix()).SubmitSubject() {
		t.Fatalf("the example publishes on %q, want %q", subject, contracts.NewNames(c.Prefix()).SubmitSubject())
	}
	var sub contracts.BatchSubmission
	if err := json.Unmarshal([]byte(body), &sub); err != nil {
		t.Fatalf("the example's body: %v", err)
	}
	m := nats.NewMsg(subject)
	for _, h := range headers {
		m.Header.Add(h[0], h[1])
	}
	m.Data = []byte(body)
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	res, err := c.Await(ctx, sub.RunID, sub.Step)
	if err != nil {
		t.Fatalf("the results of the documented submission: %v", err)
	}
	if len(res.Results) != 1 || res.Results[0].Outcome != contracts.OutcomeCompleted || res.Results[0].Output.Text() != "hi" {
		t.Fatalf("the documented submission's results: %+v", res.Results)
	}

	// The same body, no headers: refused, naming what is needed.
	bare := strings.Replace(body, `"run_id":"`+sub.RunID+`"`, `"run_id":"run-bare"`, 1)
	if err := nc.Publish(subject, []byte(bare)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-rejections:
		if r.Code != string(contracts.RejectMissingCloudEventHeaders) || !strings.Contains(r.Message, "ce-specversion") || !strings.Contains(r.Message, "ce-type") {
			t.Fatalf("the headerless submission was refused %s: %s; want missing_cloudevent_headers naming the ce-* headers", r.Code, r.Message)
		}
	case <-ctx.Done():
		t.Fatal("the headerless submission was not refused")
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		st, err := srv.JS.Stream(ctx, contracts.NewNames(c.Prefix()).DeadLetterStream())
		if err != nil {
			return false
		}
		m, err := st.GetLastMsgForSubject(ctx, contracts.NewNames(c.Prefix()).DeadLetterSubject(contracts.ConsumerBatcherSubmit))
		return err == nil && m.Header.Get("Awaken-Dead-Code") == string(contracts.RejectMissingCloudEventHeaders) && string(m.Data) == bare
	}, "the headerless submission on the dead-letter stream with code missing_cloudevent_headers")
}
