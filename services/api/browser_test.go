package api_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

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
	args := run(t, br, "read the arguments", chromedp.Text(rowSel(tk.CorrelationID)+" pre.args"))
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
