package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// testConfig registers the tools of the approval scenario: echo runs at once, ask_me
// waits for a human, counter counts its body runs durably, client_pick is answered by the
// client.
const testConfig = `
prefix: awaken
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
  - id: counter
    capability: non_recoverable
  - id: ask_me
    builtin: ran
  - id: ask_quick
    builtin: ran
  - id: ask_echo
    builtin: echo
  - id: client_pick
    kind: client_executed
  - id: ask_two
    builtin: ran
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask }
    - { pattern: ask_quick, behavior: ask, timeout: 300ms }
    - { pattern: 'ask_echo(text ~ "rm *")', behavior: deny }
    - { pattern: ask_echo, behavior: ask }
    - { pattern: ask_two, behavior: ask, approvals: 2 }
`

const waitLong = 30 * time.Second

// harness is an embedded JetStream server running the real pipeline — the five services
// and the api, wired by internal/wiring/app exactly as `awaken dev` wires them.
type harness struct {
	t      testing.TB
	srv    *stacktest.Server
	stack  *stacktest.Stack
	api    *api.Service
	client *client.Client
	nc     *nats.Conn
	base   string
	http   *http.Client
}

func newHarness(t testing.TB, opts api.Options) *harness {
	t.Helper()
	return newHarnessOf(t, opts, append(app.AllServices(), contracts.ServiceAPI))
}

// newHarnessOf starts only the given services (contracts.ServiceAPI among them).
func newHarnessOf(t testing.TB, opts api.Options, services []string) *harness {
	t.Helper()
	return newHarnessConfig(t, testConfig, opts, services)
}

// newHarnessConfig starts the given services (contracts.ServiceAPI among them) on the configuration
// cfgYAML.
func newHarnessConfig(t testing.TB, cfgYAML string, opts api.Options, services []string) *harness {
	t.Helper()
	return newHarnessStack(t, cfgYAML, app.Options{Services: services, API: opts})
}

// newHarnessStack is [newHarnessConfig] with the stack's options o (its Config is
// cfgYAML's): a test sets the services' clock (o.Now) there.
func newHarnessStack(t testing.TB, cfgYAML string, o app.Options) *harness {
	t.Helper()
	cfg := servicetest.ParseConfig(t, cfgYAML)
	cfg.Executors.BodyLedger = true // ledger reads it
	srv := stacktest.NewServer(t)
	o.Config = cfg
	st := srv.StartStack(ctxFor(t, stacktest.StartTimeout), o)
	if st.APIService == nil {
		t.Fatal("the stack did not start the api")
	}
	return &harness{t: t, srv: srv, stack: st, api: st.APIService, client: srv.Client, nc: srv.NC,
		base: strings.TrimSuffix(st.APIService.URL(), "/"), http: &http.Client{Timeout: waitLong}}
}

// ctxFor returns a context that ends after d or with the test.
var ctxFor = servicetest.Context

// call is a call of tool whose arguments are args as JSON.
var call = servicetest.CallJSON

// approvalBatch is the scenario of the issue: [echo, ask_me, counter].
func approvalBatch(run string, askArgs any) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo", "ask_me", "counter", "client_pick"}},
		Calls: []contracts.ToolCall{
			call("c1", "echo", map[string]string{"text": "before approval"}),
			call("c2", "ask_me", askArgs),
			call("c3", "counter", map[string]string{"name": run}),
		},
	}
}

// park submits the approval batch of run and waits until ask_me is parked on its ticket.
func (h *harness) park(run string, askArgs any) contracts.ResumeTicket {
	h.t.Helper()
	return stacktest.Park(h.t, ctxFor(h.t, waitLong), h.client, approvalBatch(run, askArgs), "c2")
}

// results waits for the published results of (run, 1).
func (h *harness) results(run string) *client.BatchResult {
	h.t.Helper()
	res, err := h.client.Await(ctxFor(h.t, waitLong), run, 1)
	if err != nil {
		h.t.Fatalf("await results of %s: %v", run, err)
	}
	return res
}

// ledger is how many times the body of call callID of (run, 1) ran.
func (h *harness) ledger(run, callID string) int {
	h.t.Helper()
	return h.stack.Ledger(run, 1, callID)
}

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError decodes an error body.
func (r response) apiError(t testing.TB) httpapi.Error {
	t.Helper()
	var e httpapi.Error
	r.json(t, &e)
	return e
}

// do sends one request. headers may set anything, Host included ("Host" key).
func (h *harness) do(method, path, body string, headers map[string]string) response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxFor(h.t, waitLong), method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := h.http.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (h *harness) get(path string) response { return h.do(http.MethodGet, path, "", nil) }

func (h *harness) post(path, body string) response {
	if body == "" {
		body = "{}"
	}
	return h.do(http.MethodPost, path, body, nil)
}

// batch reads the batch view over HTTP.
func (h *harness) batch(batchID string) httpapi.BatchView {
	h.t.Helper()
	r := h.get("/v1/batches/" + batchID)
	if r.status != http.StatusOK {
		h.t.Fatalf("GET batch %s: %d %s", batchID, r.status, r.body)
	}
	var v httpapi.BatchView
	r.json(h.t, &v)
	return v
}

// microRequest sends a request to a micro endpoint and returns the reply.
func (h *harness) microRequest(endpoint string, body []byte) *nats.Msg {
	h.t.Helper()
	m, err := h.nc.RequestWithContext(ctxFor(h.t, waitLong), httpapi.MicroSubject("awaken", endpoint), body)
	if err != nil {
		h.t.Fatalf("micro %s: %v", endpoint, err)
	}
	return m
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func texts(res *client.BatchResult) []string {
	out := make([]string, len(res.Results))
	for i, r := range res.Results {
		out[i] = r.Output.Text()
	}
	return out
}
