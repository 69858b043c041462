package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// chromiumPath finds a Chromium to drive. Absent one, the browser tests skip with the
// reason, except under CI=true, where they fail: CI must install the Debian package
// chromium.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("AWAKEN_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const reason = "no Chromium found (install the Debian package chromium, or set AWAKEN_CHROMIUM)"
	if os.Getenv("CI") == "true" {
		t.Fatal(reason + "; the browser tests must run under CI")
	}
	t.Skip(reason)
	return ""
}

// artifactDir is where the browser tests save screenshots: $AWAKEN_ARTIFACTS, or a
// directory under the system temp dir that outlives the test.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AWAKEN_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "awaken-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifact dir: %v", err)
	}
	return dir
}

// browser is one headless Chromium tab with a record of every dialog, uncaught exception
// and console error the page produced.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in containers
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		wg.Wait()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no timeout
		t.Fatalf("start Chromium: %v", err)
	}
	b := &browser{ctx: ctx}
	messages := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				b.problem(fmt.Sprintf("console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
			}
		}
	})
	wg.Go(func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.problem("a dialog opened, so page script ran: " + ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	})
	return b
}

func (b *browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// check fails t for every problem the page reported, except those ignore accepts.
func (b *browser) check(t *testing.T, ignore func(string) bool) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		if ignore == nil || !ignore(p) {
			t.Error(p)
		}
	}
}

// do runs actions with a deadline (a derived context, so the browser outlives it).
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLong)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](t *testing.T, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLong)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	png := run(t, b, "screenshot", chromedp.FullScreenshot(100)) // quality 100 is PNG
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
}

func rowSel(corr string) chromedp.CSS { return chromedp.CSS(`tr[data-correlation="` + corr + `"]`) }

func batchSel(batchID, rest string) chromedp.CSS {
	return chromedp.CSS(`details[data-batch="` + batchID + `"] ` + rest)
}

// clickCallButton loads the console at base, opens the row of batch and clicks the button
// of it that button selects, running the script prelude first (to answer the dialogs the
// click opens). The button is clicked from the page itself: the list re-renders on every
// record change, so a node the driver resolved first may be replaced before its click
// lands.
func (b *browser) clickCallButton(t *testing.T, base, batch, button, prelude, what string) {
	t.Helper()
	sel := batchSel(batch, button)
	b.do(t, "load the console and open the batch",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(batchSel(batch, "> summary")),
		chromedp.Click(batchSel(batch, "> summary")),
		chromedp.WaitVisible(sel),
	)
	if !run(t, b, what, chromedp.Evaluate[bool](`(() => { `+prelude+`
		const b = document.querySelector('`+string(sel)+`'); if (b) b.click(); return !!b })()`)) {
		t.Fatalf("%s: no button %s", what, sel)
	}
}

// TestBrowserConsoleApproveAndDeny loads the console in headless Chromium: the pending
// ask_me calls are listed with their model-authored arguments rendered as text (the
// <script> never runs and no element is injected); clicking approve runs the batch to
// completion, and a denial with a typed reason publishes "blocked: {reason}". Screenshots
// are saved as test artifacts.
func TestBrowserConsoleApproveAndDeny(t *testing.T) {
	br := newBrowser(t)
	h := newHarness(t, api.Options{})
	tk := h.park("run-browser", map[string]string{"text": hostile})
	tkD := h.park("run-browser-deny", map[string]string{"text": "please"})

	br.do(t, "load the console",
		chromedp.Navigate(h.base+"/"),
		chromedp.WaitVisible(rowSel(tk.CorrelationID)+" button.approve"),
		chromedp.WaitVisible(rowSel(tkD.CorrelationID)+" button.deny"),
	)
	args := run(t, br, "read the arguments", chromedp.Value(rowSel(tk.CorrelationID)+" textarea.args"))
	scripts := run(t, br, "count scripts", chromedp.Evaluate[int](`document.scripts.length`))
	injected := run(t, br, "count injected elements", chromedp.Evaluate[int](`document.querySelectorAll("#tickets img, #tickets script").length`))
	// The arguments are shown as pretty-printed JSON text, markup and all.
	if !strings.Contains(args, `"text": "<script>alert(\"pwned\")</script><img src=x onerror=alert(1)>"`) {
		t.Errorf("arguments shown as %q, want the markup as text", args)
	}
	if scripts != 1 || injected != 0 {
		t.Errorf("%d script elements and %d injected elements; the argument was parsed as HTML", scripts, injected)
	}
	br.screenshot(t, "console-pending.png")

	br.do(t, "approve",
		chromedp.Click(rowSel(tk.CorrelationID)+" button.approve"),
		chromedp.WaitNotPresent(rowSel(tk.CorrelationID)),
		chromedp.WaitVisible(batchSel("tool-batch:run-browser:1", ".badge.published")),
	)
	if got := texts(h.results("run-browser")); !slices.Equal(got, []string{"before approval", "ran ask_me", "1"}) {
		t.Fatalf("results after approving in the browser = %q", got)
	}

	br.do(t, "deny with a reason",
		chromedp.SendKeys(rowSel(tkD.CorrelationID)+" .deny-form input", "not from the browser"),
		chromedp.Click(rowSel(tkD.CorrelationID)+" button.deny"),
		chromedp.WaitNotPresent(rowSel(tkD.CorrelationID)),
		chromedp.WaitVisible(batchSel("tool-batch:run-browser-deny:1", ".badge.published")),
		chromedp.Click(batchSel("tool-batch:run-browser:1", "> summary")),
		chromedp.WaitVisible(batchSel("tool-batch:run-browser:1", "pre.output")),
	)
	if got := texts(h.results("run-browser-deny")); !slices.Equal(got, []string{"before approval", "blocked: not from the browser", "1"}) {
		t.Fatalf("results after denying in the browser = %q", got)
	}
	br.screenshot(t, "console-completed.png")
	br.check(t, nil)
}

// TestBrowserConsoleSignIn: with a token configured the console asks for it, refuses a
// wrong one, and shows the pending approvals once signed in.
func TestBrowserConsoleSignIn(t *testing.T) {
	br := newBrowser(t)
	h := newHarness(t, api.Options{Token: "browser-token"})
	tk := h.park("run-browser-auth", map[string]string{})
	br.do(t, "try a wrong token",
		chromedp.Navigate(h.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#login-form`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), "wrong"),
		chromedp.Click(chromedp.CSS(`#login-form button`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("login-error").textContent.length > 0`),
	)
	refused := run(t, br, "read the refusal", chromedp.Text(chromedp.CSS(`#login-error`)))
	if !strings.Contains(refused, "refused") {
		t.Errorf("wrong token message %q", refused)
	}
	br.do(t, "sign in",
		chromedp.SetValue(chromedp.CSS(`#token`), "browser-token"),
		chromedp.Click(chromedp.CSS(`#login-form button`)),
		chromedp.WaitVisible(rowSel(tk.CorrelationID)),
	)
	br.screenshot(t, "console-signed-in.png")
	// The probe and the wrong token are answered 401, which the browser logs as failed
	// requests; nothing else may appear.
	br.check(t, func(p string) bool { return strings.Contains(p, "401") })
}

// TestBrowserConsoleShowsProgress: while the progress tool runs, the expanded batch shows
// the call's live progress (a bar and "n/total step n of total"), fed by the progress
// events of the console's event stream; once the call has ended (its run is cancelled, so
// the test does not wait for the slow tool) the progress is gone.
func TestBrowserConsoleShowsProgress(t *testing.T) {
	br := newBrowser(t)
	h := newHarnessConfig(t, "tools:\n  - id: progress\npolicy: {default_behavior: allow}\n", api.Options{},
		append(app.AllServices(), contracts.ServiceAPI))
	const batchID = "tool-batch:run-progress:1"
	br.do(t, "load the console", chromedp.Navigate(h.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#status.ok`)))
	h.submitCalls("run-progress", []string{"progress"}, call("c1", "progress", map[string]int{"steps": 600, "ms": 100}))
	br.do(t, "watch the progress",
		chromedp.WaitVisible(batchSel(batchID, "> summary")),
		chromedp.Click(batchSel(batchID, "> summary")),
		chromedp.WaitVisible(batchSel(batchID, `.progress[data-call="c1"] progress`)),
	)
	// The batch list re-renders on every event: wait until the text is there, then read it
	// in one evaluation.
	br.do(t, "wait for the progress text", chromedp.Poll[chromedp.Void](
		`/^\s*\d+\/600 step \d+ of 600$/.test((document.querySelector('`+string(batchSel(batchID, `.progress[data-call="c1"]`))+`') || {}).textContent || "")`))
	shown := textOf(t, br, batchSel(batchID, `.progress[data-call="c1"]`))
	if !regexp.MustCompile(`^\s*\d+/600 step \d+ of 600$`).MatchString(shown) {
		t.Errorf("progress shown as %q", shown)
	}
	br.screenshot(t, "console-progress.png")
	if err := h.client.Cancel(ctxFor(t, waitLong), "run-progress", "seen enough"); err != nil {
		t.Fatal(err)
	}
	br.do(t, "wait for the result",
		chromedp.WaitVisible(batchSel(batchID, ".badge.published")),
		chromedp.WaitNotPresent(batchSel(batchID, ".progress")),
	)
	// A network change on the host (containers of other jobs coming and going) fails the
	// requests in flight; the console retries them.
	br.check(t, func(p string) bool { return strings.Contains(p, "ERR_NETWORK_CHANGED") })
}

// setArguments types text into the argument box of ticket corr (as an input event, so the
// console keeps it across re-renders).
func setArguments(corr, text string) chromedp.Action[chromedp.Void] {
	sel, _ := json.Marshal(string(rowSel(corr)) + " textarea.args")
	val, _ := json.Marshal(text)
	return chromedp.Poll[chromedp.Void](`(() => { const b = document.querySelector(` + string(sel) +
		`); b.value = ` + string(val) + `; b.dispatchEvent(new Event("input")); return true; })()`)
}

// textOf returns the text of the first element sel selects ("" for none), read in one
// evaluation so a re-render cannot pull the node away between finding and reading it.
func textOf(t *testing.T, br *browser, sel chromedp.CSS) string {
	t.Helper()
	q, _ := json.Marshal(string(sel))
	return run(t, br, "read "+string(sel), chromedp.Evaluate[string](`(document.querySelector(`+string(q)+`) || {}).textContent || ""`))
}

// actionError waits until the console shows an action error and returns it.
func actionError(t *testing.T, br *browser) string {
	t.Helper()
	br.do(t, "wait for the action error", chromedp.Poll[chromedp.Void](`document.getElementById("action-error").textContent.length > 0`))
	return run(t, br, "read the action error", chromedp.Text(chromedp.CSS(`#action-error`)))
}

// TestBrowserConsoleApproveWithEdits: the ticket's argument box is prefilled with the
// proposed arguments; text that is not JSON is refused in the page, an edit that does not
// fit the tool shows the api's 422 invalid_arguments, and either way the ticket stays
// open; a valid edit runs the tool with it, and the batch shows who decided (the name of
// the signed-in token), the proposed and the approved arguments.
func TestBrowserConsoleApproveWithEdits(t *testing.T) {
	br := newBrowser(t)
	h := newHarness(t, api.Options{Tokens: map[string]string{"alice": "tok-alice-0123456789"}})
	h.waitEchoSchema()
	tk := h.parkEcho("run-browser-edit", "proposed")
	br.do(t, "sign in",
		chromedp.Navigate(h.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#login-form`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), "tok-alice-0123456789"),
		chromedp.Click(chromedp.CSS(`#login-form button`)),
		chromedp.WaitVisible(rowSel(tk.CorrelationID)+" textarea.args"),
	)
	var prefilled map[string]string
	if err := json.Unmarshal([]byte(run(t, br, "read the box", chromedp.Value(rowSel(tk.CorrelationID)+" textarea.args"))), &prefilled); err != nil || prefilled["text"] != "proposed" {
		t.Fatalf("the box holds %v (%v), want the proposed arguments", prefilled, err)
	}
	stillOpen := func(what string) {
		t.Helper()
		if _, err := h.api.Ticket(ctxFor(t, waitLong), tk.CorrelationID); err != nil {
			t.Fatalf("the ticket is gone after %s: %v", what, err)
		}
		if n := run(t, br, "count the row", chromedp.Evaluate[int](`document.querySelectorAll('`+string(rowSel(tk.CorrelationID))+`').length`)); n != 1 {
			t.Fatalf("the ticket's row is gone after %s", what)
		}
	}

	br.do(t, "approve text that is not JSON", setArguments(tk.CorrelationID, `{"text": `), chromedp.Click(rowSel(tk.CorrelationID)+" button.approve"))
	if msg := actionError(t, br); !strings.Contains(msg, "not valid JSON") {
		t.Fatalf("action error %q, want the JSON refusal", msg)
	}
	stillOpen("text that is not JSON")

	br.do(t, "approve an edit that does not fit the tool",
		chromedp.Poll[chromedp.Void](`(() => { document.getElementById("action-error").textContent = ""; return true; })()`),
		setArguments(tk.CorrelationID, `{"text": 5}`), chromedp.Click(rowSel(tk.CorrelationID)+" button.approve"))
	if msg := actionError(t, br); !strings.Contains(msg, string(contracts.ResumeInvalidArguments)) {
		t.Fatalf("action error %q, want invalid_arguments", msg)
	}
	stillOpen("an invalid edit")
	br.screenshot(t, "console-invalid-edit.png")

	batch := contracts.BatchID("run-browser-edit", 1)
	br.do(t, "approve a valid edit",
		setArguments(tk.CorrelationID, `{"text": "from the browser"}`),
		chromedp.Click(rowSel(tk.CorrelationID)+" button.approve"),
		chromedp.WaitNotPresent(rowSel(tk.CorrelationID)),
		chromedp.WaitVisible(batchSel(batch, ".badge.published")),
		chromedp.Click(batchSel(batch, "> summary")),
		chromedp.WaitVisible(batchSel(batch, "pre.args.proposed")),
	)
	if got := texts(h.results("run-browser-edit")); !slices.Equal(got, []string{"from the browser"}) {
		t.Fatalf("results after approving the edit = %q", got)
	}
	// The batch list re-renders on every event: read each text in one evaluation.
	actor := textOf(t, br, batchSel(batch, "td.actor"))
	proposed := textOf(t, br, batchSel(batch, "pre.args.proposed"))
	approved := textOf(t, br, batchSel(batch, "pre.args.approved"))
	if actor != "alice (edited arguments)" || !strings.Contains(proposed, `"proposed"`) || !strings.Contains(approved, `"from the browser"`) {
		t.Fatalf("batch shows decided by %q, proposed %q, approved %q", actor, proposed, approved)
	}
	br.screenshot(t, "console-edited.png")
	// The sign-in probe and the 422 are failed requests the browser logs; nothing else may appear.
	br.check(t, func(p string) bool { return strings.Contains(p, "401") || strings.Contains(p, "422") })
}

func toolSel(id, rest string) chromedp.CSS {
	return chromedp.CSS(`tr[data-tool="` + id + `"] ` + rest)
}

// TestBrowserConsolePauseTool: the console lists the tools; pausing echo with a typed
// reason shows the paused badge and the reason, and echo's next call is blocked with that
// reason; a tool paused elsewhere (the CLI's micro endpoint) shows paused after a reload;
// resume clears the badge and echo runs again.
func TestBrowserConsolePauseTool(t *testing.T) {
	br := newBrowser(t)
	h := newHarness(t, api.Options{})
	runEcho := func(runID string) string {
		t.Helper()
		sub := contracts.BatchSubmission{RunID: runID, ThreadID: "t-" + runID, Step: 1,
			Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"echo"}},
			Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": "hi"})}}
		if _, err := h.client.Submit(ctxFor(t, waitLong), sub); err != nil {
			t.Fatal(err)
		}
		return texts(h.results(runID))[0]
	}
	br.do(t, "load the console",
		chromedp.Navigate(h.base+"/"),
		chromedp.WaitVisible(toolSel("echo", "button.pause")),
		chromedp.WaitVisible(toolSel("counter", ".badge.active")),
	)
	br.do(t, "pause echo",
		chromedp.SendKeys(toolSel("echo", ".pause-form input"), "bad deploy"),
		chromedp.Click(toolSel("echo", "button.pause")),
		chromedp.WaitVisible(toolSel("echo", ".badge.paused")),
		chromedp.WaitVisible(toolSel("echo", "button.resume")),
	)
	if reason := run(t, br, "read the reason", chromedp.Text(toolSel("echo", ".pause-reason"))); reason != "bad deploy" {
		t.Errorf("pause reason shown as %q", reason)
	}
	if got := runEcho("run-console-paused"); got != "blocked: tool_paused: tool echo is paused: bad deploy" {
		t.Errorf("echo while paused: %q", got)
	}
	if _, err := h.client.PauseTool(ctxFor(t, waitLong), "counter", "from the cli", "cli:test"); err != nil {
		t.Fatal(err)
	}
	br.do(t, "reload and see the pause made elsewhere",
		chromedp.Reload(),
		chromedp.WaitVisible(toolSel("counter", ".badge.paused")),
	)
	br.screenshot(t, "console-tools-paused.png")
	br.do(t, "resume echo",
		chromedp.Click(toolSel("echo", "button.resume")),
		chromedp.WaitVisible(toolSel("echo", ".badge.active")),
	)
	if got := runEcho("run-console-resumed"); got != "hi" {
		t.Errorf("echo after resume: %q", got)
	}
	br.check(t, nil)
}

// TestBrowserConsoleCancelCall: an operator cancels a parked call from the batch list; the
// call ends cancelled before start, the batch publishes, and the row shows who cancelled.
func TestBrowserConsoleCancelCall(t *testing.T) {
	br := newBrowser(t)
	h := newHarness(t, api.Options{})
	const runID = "run-browser-cancel-call"
	h.park(runID, map[string]string{})
	batch := "tool-batch:" + runID + ":1"
	br.clickCallButton(t, h.base, batch, `button.cancel-call[data-operation="`+batch+`:c2"]`, "", "cancel the parked call")
	// The answer comes once the call ended; the opened batch's detail then shows its output.
	natstest.WaitFor(t, waitLong, func() bool {
		return strings.Contains(textOf(t, br, batchSel(batch, "tr.detail:nth-of-type(4) pre.output")), "cancelled before start")
	}, "the console to show the cancelled call's output")
	if got := texts(h.results(runID)); !slices.Equal(got, []string{"before approval", "cancelled before start: cancelled by operator", "1"}) {
		t.Fatalf("results after cancelling in the browser = %q", got)
	}
	br.screenshot(t, "console-call-cancelled.png")
	br.check(t, nil)
}

// TestBrowserConsoleResolveCall: an operator resolves, from the batch list, a call a run
// cancel sealed indeterminate after its batch was published — answering the console's
// questions "did it run?" (no) and the note — and the row shows the correction, who made
// it and with which role; the correction is on the run's corrections subject.
func TestBrowserConsoleResolveCall(t *testing.T) {
	br := newBrowser(t)
	h := newHarness(t, api.Options{})
	const runID = "run-browser-resolve-call"
	h.park(runID, map[string]string{})
	if r := h.post("/v1/runs/"+runID+"/cancel", `{}`); r.status != http.StatusOK {
		t.Fatalf("cancel the run: %d %s", r.status, r.body)
	}
	h.results(runID)
	batch := "tool-batch:" + runID + ":1"
	// The console asks with confirm and prompt: answered here as the operator would.
	br.clickCallButton(t, h.base, batch, `button.resolve-call[data-operation="`+batch+`:c2"]`,
		`window.confirm = () => false; window.prompt = () => "no mail went out";`, "resolve the sealed call as not run")
	natstest.WaitFor(t, waitLong, func() bool {
		return strings.Contains(textOf(t, br, batchSel(batch, ".resolution-mark")), "corrected as not_run")
	}, "the console to show the correction")
	corrections, err := h.client.Corrections(ctxFor(t, waitLong), runID)
	if err != nil || len(corrections) != 1 || corrections[0].Note != "no mail went out" {
		t.Fatalf("corrections = %+v (%v)", corrections, err)
	}
	br.screenshot(t, "console-call-resolved.png")
	br.check(t, nil)
}
