package mcpserve_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	mgoclient "github.com/mark3labs/mcp-go/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The same checks with both clients, the official go-sdk's and mcp-go's, over both
// transports.

// note is one progress notification a client received.
type note struct {
	token           string
	progress, total float64
	message         string
}

// testClient is one MCP client session of a test, whichever library it uses.
type testClient struct {
	name      string
	call      func(ctx context.Context, tool string, args map[string]any, token string) (out string, isError bool, err error)
	progress  func() []note
	sessionID func() string
}

func goSDKClient(name string, cs *mcp.ClientSession, progress *progressLog) testClient {
	return testClient{name: name,
		call: func(ctx context.Context, tool string, args map[string]any, token string) (string, bool, error) {
			params := &mcp.CallToolParams{Name: tool, Arguments: args}
			if token != "" {
				params.Meta = mcp.Meta{"progressToken": token}
			}
			res, err := cs.CallTool(ctx, params)
			return text(res), res != nil && res.IsError, err
		},
		progress: func() []note {
			var notes []note
			for _, p := range progress.all() {
				notes = append(notes, note{fmt.Sprint(p.ProgressToken), p.Progress, p.Total, p.Message})
			}
			return notes
		},
		sessionID: cs.ID,
	}
}

func mcpGoClient(name string, c *mgoclient.Client, progress *mgoProgress) testClient {
	return testClient{name: name,
		call: func(ctx context.Context, tool string, args map[string]any, token string) (string, bool, error) {
			var tok any
			if token != "" {
				tok = token
			}
			res, err := mgoCall(ctx, c, tool, args, tok)
			return mgoText(res), res != nil && res.IsError, err
		},
		progress: func() []note {
			var notes []note
			for _, f := range progress.all() {
				n := note{token: fmt.Sprint(f["progressToken"]), message: fmt.Sprint(f["message"])}
				n.progress, _ = f["progress"].(float64)
				n.total, _ = f["total"].(float64)
				notes = append(notes, n)
			}
			return notes
		},
		sessionID: c.GetSessionId,
	}
}

// allClients opens one session of each client over each transport: over HTTP with
// alice's token, over stdio as cli:tester.
func (s *stack) allClients() []testClient {
	s.t.Helper()
	var gp progressLog
	gsdkHTTP := goSDKClient("go-sdk over http", s.connectHTTP(aliceToken, "", &gp), &gp)
	cs, sp := startStdio(s.t, s, "cli:tester", nil)
	gsdkStdio := goSDKClient("go-sdk over stdio", cs, sp)
	mh, mhp := s.connectMGoHTTP(aliceToken)
	ms, msp := s.connectMGoStdio("cli:tester")
	return []testClient{gsdkHTTP, gsdkStdio, mcpGoClient("mcp-go over http", mh, mhp), mcpGoClient("mcp-go over stdio", ms, msp)}
}

// TestRunningToolProgress: a running tool's progress reaches a client that sent a
// progressToken, as notifications/progress with that token, the tool's own values and
// total, increasing, before the result.
func TestRunningToolProgress(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	for _, c := range s.allClients() {
		out, isErr, err := c.call(ctx, "progress", map[string]any{"steps": 4, "ms": 300}, "tok-"+c.name)
		if err != nil || isErr || out != "done after 4 steps" {
			t.Errorf("%s: progress: %q %v %v", c.name, out, isErr, err)
			continue
		}
		notes := c.progress()
		t.Logf("%s: %d progress notifications: %+v", c.name, len(notes), notes)
		if len(notes) < 2 {
			t.Errorf("%s: %d progress notifications before the result, want the tool's (at least 2 of 4)", c.name, len(notes))
			continue
		}
		for i, n := range notes {
			if n.token != "tok-"+c.name || n.total != 4 || !strings.HasPrefix(n.message, "step ") ||
				(i > 0 && n.progress <= notes[i-1].progress) {
				t.Errorf("%s: notification %d %+v, want token tok-%s, total 4, a step message, increasing", c.name, i, n, c.name)
			}
		}
	}
}

// TestMCPGoGivesUp: mcp-go gives up on a call when its context ends. Over HTTP it only
// drops the request (no notifications/cancelled): that call is cancelled — a parked one
// ends "cancelled before start" and its ticket is closed, a running one is stopped — and
// the session's next call is answered at once as the run's next step, never waiting
// behind the call no one waits for. Over stdio it sends notifications/cancelled, which
// cancels the session's run: the next call runs at once in the session's next run.
func TestMCPGoGivesUp(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	mh, _ := s.connectMGoHTTP(aliceToken)
	ms, _ := s.connectMGoStdio("cli:tester")
	for name, c := range map[string]*mgoclient.Client{"http": mh, "stdio": ms} {
		giveUpCtx, giveUp := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := mgoCall(giveUpCtx, c, "ask_me", map[string]any{}, nil)
			done <- err
		}()
		tk := s.openTicket()
		giveUp()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("mcp-go over %s: the call given up: %v", name, err)
		}
		run, step := tk.RunID, int64(2)
		if name == "http" {
			s.checkCancelledBeforeStart(ctx, tk.RunID, 1)
		} else {
			run, step = nextRun(t, tk.RunID), 1
		}
		s.checkNextCall(ctx, c, name, run, step)

		// A running call given up on: slow would sleep 20 s (within the stack's stop
		// timeout, should its body outlive the cancel), its result "done".
		giveUpCtx, giveUp = context.WithCancel(ctx)
		go func() {
			_, err := mgoCall(giveUpCtx, c, "slow", map[string]any{"ms": 20000}, nil)
			done <- err
		}()
		natstest.WaitFor(t, waitTimeout, func() bool {
			return s.httpJSON(http.MethodGet, "/v1/batches/"+contracts.BatchID(run, step+1), nil, nil) == http.StatusOK
		}, "the slow call submitted")
		giveUp()
		<-done
		b, err := s.client.Await(ctx, run, step+1)
		if err != nil {
			t.Fatal(err)
		}
		if r := b.Results[0]; strings.Contains(mustJSON(r.Output), "done") || !strings.Contains(mustJSON(r.Output), "cancel") {
			t.Errorf("mcp-go over %s: the slow call given up on: %+v, want it cancelled", name, r)
		}
		if name == "http" {
			s.checkNextCall(ctx, c, name, run, step+2)
		} else {
			s.checkNextCall(ctx, c, name, nextRun(t, run), 1)
		}
		s.rejectNone(name)
	}
}

// checkNextCall fails the test unless an echo on c is answered within waitTimeout as
// step of runID.
func (s *stack) checkNextCall(ctx context.Context, c *mgoclient.Client, name, runID string, step int64) {
	s.t.Helper()
	res, err := mgoCall(ctx, c, "echo", map[string]any{"text": "next"}, nil)
	if err != nil || mgoText(res) != "next" {
		s.t.Fatalf("mcp-go over %s: the next call: %q, %v", name, mgoText(res), err)
	}
	if got := res.Meta.AdditionalFields["awaken/batch_id"]; got != contracts.BatchID(runID, step) {
		s.t.Fatalf("mcp-go over %s: the next call's batch %v, want %s", name, got, contracts.BatchID(runID, step))
	}
}

// rejectNone fails the test if a batch was refused (run_busy would say a call was
// submitted beside one still running).
func (s *stack) rejectNone(name string) {
	s.t.Helper()
	if r := rejections(s.t, s); len(r) != 0 {
		s.t.Fatalf("%s: rejections %v, want none", name, r)
	}
}

// TestBlockedApprovalRestart: with both clients over both transports, a call the policy
// denies is an isError result saying blocked, and a call parked on approval reports its
// ticket as progress and answers once approved; with mcp-go over HTTP (the official
// client's: TestHTTPRestartWhileWaiting) a call waiting when the api stops is answered
// stopped with its batch, and a new session works after the restart.
func TestBlockedApprovalRestart(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	clients := s.allClients()
	for _, c := range clients {
		out, isErr, err := c.call(ctx, "forbidden", map[string]any{}, "")
		if err != nil || !isErr || !strings.Contains(out, "blocked") {
			t.Errorf("%s: forbidden: %q %v %v, want a blocked error result", c.name, out, isErr, err)
		}
		done := make(chan string, 1)
		go func() {
			out, _, err := c.call(ctx, "ask_me", map[string]any{}, "parked")
			done <- fmt.Sprint(out, err)
		}()
		tk := s.openTicket()
		natstest.WaitFor(t, waitTimeout, func() bool {
			for _, n := range c.progress() {
				if n.token == "parked" && strings.Contains(n.message, tk.CorrelationID) {
					return true
				}
			}
			return false
		}, "a progress notification naming the ticket")
		s.approve(tk)
		if got := <-done; got != "ran ask_me<nil>" {
			t.Errorf("%s: ask_me after approval: %q", c.name, got)
		}
	}

	mgoHTTP := clients[2]
	done := make(chan string, 1)
	go func() {
		out, _, err := mgoHTTP.call(ctx, "ask_me", map[string]any{}, "")
		done <- fmt.Sprint(out, err)
	}()
	tk := s.openTicket()
	s.stopAPI()
	if got := <-done; !strings.HasPrefix(got, "stopped") || !strings.Contains(got, tk.BatchID) || !strings.Contains(got, "/v1/batches/"+tk.BatchID+"/results") {
		t.Fatalf("%s: the waiting call at the stop: %q, want stopped naming %s and its results route", mgoHTTP.name, got, tk.BatchID)
	}
	s.startAPI()
	again, _ := s.connectMGoHTTP(aliceToken)
	if res, err := mgoCall(ctx, again, "echo", map[string]any{"text": "back"}, nil); err != nil || mgoText(res) != "back" {
		t.Fatalf("mcp-go over http: a new session after the restart: %q, %v", mgoText(res), err)
	}
}

// TestParkedThenRunningProgress: a call that waits on approval, then runs and reports
// progress, sends both to the client on one increasing scale: the wait's notifications,
// then the tool's shifted past them, its total with it.
func TestParkedThenRunningProgress(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	for _, c := range s.allClients() {
		done := make(chan string, 1)
		go func() {
			out, _, err := c.call(ctx, "ask_progress", map[string]any{"steps": 3, "ms": 300}, "both")
			done <- fmt.Sprint(out, err)
		}()
		tk := s.openTicket()
		natstest.WaitFor(t, waitTimeout, func() bool { return len(c.progress()) > 0 }, "the wait's progress notification")
		s.approve(tk)
		if got := <-done; got != "done after 3 steps<nil>" {
			t.Errorf("%s: ask_progress: %q", c.name, got)
			continue
		}
		notes := c.progress()
		t.Logf("%s: %+v", c.name, notes)
		var running int
		for i, n := range notes {
			if i > 0 && n.progress <= notes[i-1].progress {
				t.Errorf("%s: notification %d %+v does not increase on %+v", c.name, i, n, notes[i-1])
			}
			if strings.HasPrefix(n.message, "step ") {
				running++
				if n.total != n.progress-float64(mustStep(t, n.message))+3 {
					t.Errorf("%s: notification %+v: total not shifted with the progress", c.name, n)
				}
			}
		}
		if !strings.HasPrefix(notes[0].message, "waiting for permission") || running < 2 {
			t.Errorf("%s: notifications %+v, want the wait's, then the running tool's", c.name, notes)
		}
	}
}

// mustStep is N of a "step N of M" progress message.
func mustStep(t *testing.T, msg string) int {
	t.Helper()
	var n, m int
	if _, err := fmt.Sscanf(msg, "step %d of %d", &n, &m); err != nil {
		t.Fatalf("progress message %q: %v", msg, err)
	}
	return n
}
