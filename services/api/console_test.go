package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// hostile is a model-authored argument that would run script if rendered as HTML.
const hostile = `<script>alert("pwned")</script><img src=x onerror=alert(1)>`

// TestConsoleIsServedWithStrictHeaders: the console shell and its assets are served with
// a CSP that forbids inline script and style and framing, nosniff, and no inline code.
func TestConsoleIsServedWithStrictHeaders(t *testing.T) {
	h := newHarness(t, api.Options{})
	r := h.get("/")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", r.status, r.header.Get("Content-Type"))
	}
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q allows unsafe sources", csp)
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("headers %v", r.header)
	}
	html := string(r.body)
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), // a script element with inline code
		regexp.MustCompile(`<script(?:(?:\s+[a-z]+(?:="[^"]*")?)*)>`),
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`), // inline event handlers
		regexp.MustCompile(`(?i)\sstyle\s*=`),
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)javascript:`),
	} {
		if loc := bad.FindStringIndex(html); loc != nil && !strings.Contains(html[loc[0]:loc[1]], "src=") {
			t.Errorf("index.html contains %q", html[loc[0]:loc[1]])
		}
	}
	for _, asset := range []struct{ path, ctype string }{{"/console.js", "text/javascript"}, {"/console.css", "text/css"}} {
		r := h.get(asset.path)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), asset.ctype) {
			t.Errorf("GET %s: %d %s", asset.path, r.status, r.header.Get("Content-Type"))
		}
	}
}

// TestConsoleScriptNeverParsesHTML is the DOM-free check of the console's escaping rule:
// the script has no sink that parses a string as HTML or code, and it renders the fields
// of a ticket and of a call (arguments, tool, run, output) through textContent.
func TestConsoleScriptNeverParsesHTML(t *testing.T) {
	h := newHarness(t, api.Options{})
	js := string(h.get("/console.js").body)
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
		"createContextualFragment", "DOMParser", "srcdoc", ".html(", "javascript:"} {
		if strings.Contains(js, sink) {
			t.Errorf("console.js uses %s", sink)
		}
	}
	for _, want := range []string{
		`el("pre", { className: "args", text: prettyJSON(t.arguments) })`,
		`box.value = argumentsText(t);`,
		`let text = c.actor || "(unnamed)";`,
		`return el("td", { className: c.actor_claimed ? "actor claimed" : "actor", title: title, text: text });`,
		`el("code", { text: t.tool_id })`,
		`el("code", { text: t.run_id })`,
		`el("pre", { className: "output", text: text })`,
		`el("td", { title: c.old_reason || "", text: c.old })`,
		`el("td", null, el("code", { text: r.rule })`,
		`if (k === "text") node.textContent = String(v);`,
		`node.append(typeof c === "string" ? document.createTextNode(c) : c);`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("console.js no longer renders through textContent: missing %q", want)
		}
	}
	// setAttribute never receives an on* name or a URL-bearing attribute from data.
	if regexp.MustCompile(`setAttribute\(\s*["'](on|href|src)`).MatchString(js) {
		t.Error("console.js sets an event or URL attribute")
	}
}

// TestScriptArgumentIsEscapedInAPIAndStream: a <script> in a call's arguments reaches the
// API JSON and the event stream only as escaped JSON text, and decodes back unchanged.
func TestScriptArgumentIsEscapedInAPIAndStream(t *testing.T) {
	h := newHarness(t, api.Options{})
	events := h.openStream(t)
	events.next(t, api.EventHello, nil)
	tk := h.park("run-xss", map[string]string{"text": hostile})

	ev := events.next(t, api.EventTicket, func(data string) bool { return strings.Contains(data, tk.CorrelationID) })
	for name, body := range map[string]string{
		"GET /v1/tickets":         string(h.get("/v1/tickets").body),
		"GET /v1/tickets/{id}":    string(h.get("/v1/tickets/" + tk.CorrelationID).body),
		"GET /v1/batches/{id}":    string(h.get("/v1/batches/" + tk.BatchID).body),
		"stream event ticket put": ev,
	} {
		if strings.ContainsAny(body, "<>") {
			t.Errorf("%s carries raw markup: %s", name, body)
		}
		if !strings.Contains(body, `\u003cscript\u003e`) {
			t.Errorf("%s does not carry the escaped argument: %s", name, body)
		}
	}
	var got contracts.ResumeTicket
	h.get("/v1/tickets/"+tk.CorrelationID).json(t, &got)
	var args map[string]string
	if err := json.Unmarshal(got.Arguments, &args); err != nil || args["text"] != hostile {
		t.Fatalf("arguments decode to %q (%v), want the original text", args["text"], err)
	}

	// The pipeline's own writers escape markup when they store a record, so the api's
	// escaping is checked on a record whose stored bytes hold raw markup.
	const corr = "perm.raw-xss.1.c1"
	raw := `{"correlation_id":"` + corr + `","run_id":"raw-xss","thread_id":"t","snapshot_id":"s","batch_id":"tool-batch:raw-xss:1",` +
		`"call_id":"c1","tool_id":"ask_me","arguments":{"text":` + strconv.Quote(hostile) + `},"reason":"permission","opened_at":"2026-01-01T00:00:00Z"}`
	kv, err := h.stack.Env.JS.KeyValue(ctxFor(t, waitLong), h.stack.Env.Names.TicketsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctxFor(t, waitLong), corr, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	ev = events.next(t, api.EventTicket, func(data string) bool { return strings.Contains(data, corr) })
	for name, body := range map[string]string{
		"GET /v1/tickets of a raw record":      string(h.get("/v1/tickets").body),
		"GET /v1/tickets/{id} of a raw record": string(h.get("/v1/tickets/" + corr).body),
		"stream event of a raw record":         ev,
	} {
		if strings.ContainsAny(body, "<>") || !strings.Contains(body, `\u003cscript\u003e`) {
			t.Errorf("%s is not escaped: %s", name, body)
		}
	}
}

// TestStreamFollowsTheBatch: the event stream reports the ticket opening, its deletion on
// approval, the call records moving and the batch being published; Stop ends open streams.
func TestStreamFollowsTheBatch(t *testing.T) {
	h := newHarness(t, api.Options{})
	events := h.openStream(t)
	events.next(t, api.EventHello, nil)
	const run = "run-stream"
	tk := h.park(run, map[string]string{})
	batchID := contracts.BatchID(run, 1)
	events.next(t, api.EventTicket, func(d string) bool { return strings.Contains(d, `"op":"put"`) && strings.Contains(d, tk.CorrelationID) })
	if r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", ""); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	events.next(t, api.EventTicket, func(d string) bool {
		return strings.Contains(d, `"op":"delete"`) && strings.Contains(d, tk.CorrelationID)
	})
	events.next(t, api.EventCall, func(d string) bool {
		return strings.Contains(d, `"call_id":"c3"`) && strings.Contains(d, `"phase":"Completed"`) && strings.Contains(d, batchID)
	})
	events.next(t, api.EventBatch, func(d string) bool { return strings.Contains(d, batchID) })
	h.results(run)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.api.Stop(ctx); err != nil {
		t.Fatalf("stop with an open stream: %v", err)
	}
	events.closed(t)
}

// eventStream reads server-sent events of GET /v1/stream in the background.
type eventStream struct {
	ch   chan [2]string // name, data
	done chan struct{}
}

func (h *harness) openStream(t *testing.T) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET /v1/stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	es := &eventStream{ch: make(chan [2]string, 1024), done: make(chan struct{})}
	t.Cleanup(func() {
		cancel()
		res.Body.Close()
		<-es.done
	})
	go func() {
		defer close(es.done)
		defer close(es.ch)
		sc := bufio.NewScanner(res.Body)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if name != "" {
					es.ch <- [2]string{name, data}
				}
				name, data = "", ""
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return es
}

// receive returns the next event, ok false once the stream ended; the test fails with
// failure when none comes before deadline.
func (es *eventStream) receive(t *testing.T, deadline <-chan time.Time, failure string) (ev [2]string, ok bool) {
	t.Helper()
	select {
	case ev, ok = <-es.ch:
	case <-deadline:
		t.Fatal(failure)
	}
	return ev, ok
}

// next returns the data of the first event called name matching match (nil matches all),
// skipping others.
func (es *eventStream) next(t *testing.T, name string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		ev, ok := es.receive(t, deadline, fmt.Sprintf("no %s event within %s", name, waitLong))
		if !ok {
			t.Fatalf("stream ended while waiting for %s", name)
		}
		if ev[0] == name && (match == nil || match(ev[1])) {
			return ev[1]
		}
	}
}

// closed waits for the server to end the stream.
func (es *eventStream) closed(t *testing.T) {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		if _, ok := es.receive(t, deadline, "the stream did not end"); !ok {
			return
		}
	}
}
