package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

const pauseConfig = `
prefix: awaken
tools:
  - id: hold
    capability: replay_safe
  - id: echo
    capability: replay_safe
  - id: ask_hold
    builtin: hold
    capability: replay_safe
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_hold, behavior: ask }
`

// HoldArgs are the arguments of the test tool hold: with block set, the call reports that
// it entered and waits until the test releases it.
type HoldArgs struct {
	Block bool `json:"block,omitempty"`
}

// pauseRig runs the back of the pipeline (batcher, brain-exec with hold, publisher) once,
// and the gate and the api as a front that the test restarts over the same JetStream.
type pauseRig struct {
	t       *testing.T
	srv     *stacktest.Server
	cfg     *config.Config
	entered chan struct{}
	release chan struct{}
	front   *stacktest.Stack
	client  *client.Client
	base    string
}

func newPauseRig(t *testing.T) *pauseRig {
	cfg, err := config.Parse([]byte(pauseConfig))
	if err != nil {
		t.Fatal(err)
	}
	srv := stacktest.NewServer(t)
	r := &pauseRig{t: t, srv: srv, cfg: cfg, client: srv.Client, entered: make(chan struct{}, 4), release: make(chan struct{})}
	reg := toolreg.NewRegistry()
	if err := toolreg.Register(reg, tool.ToolFunc("hold", "Blocks until released when `block` is set.", contracts.CapabilityReplaySafe,
		func(ctx context.Context, a HoldArgs) (string, error) {
			if a.Block {
				r.entered <- struct{}{}
				select {
				case <-r.release:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return "held", nil
		})); err != nil {
		t.Fatal(err)
	}
	r.start(app.Options{Services: []string{contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceBatcher}, BrainRegistry: reg, BrainBuiltins: true})
	r.front = r.start(app.Options{Services: []string{contracts.ServiceGate, contracts.ServiceAPI}})
	r.base = strings.TrimSuffix(r.front.APIService.URL(), "/")
	return r
}

// start starts the services o names on the rig's configuration.
func (r *pauseRig) start(o app.Options) *stacktest.Stack {
	r.t.Helper()
	o.Config = r.cfg
	return r.srv.StartStack(ctxFor(r.t, stacktest.StartTimeout), o)
}

// restartFront restarts the gate and the api.
func (r *pauseRig) restartFront() {
	r.t.Helper()
	r.front.Restart(ctxFor(r.t, stacktest.StartTimeout))
	r.base = strings.TrimSuffix(r.front.APIService.URL(), "/")
}

// httpReply is a decoded HTTP response of the api.
type httpReply struct {
	status int
	body   []byte
}

func (h httpReply) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(h.body, v); err != nil {
		t.Fatalf("decode %s: %v", h.body, err)
	}
}

var apiClient = &http.Client{Timeout: waitLong}

func (r *pauseRig) post(path, body string) httpReply {
	return r.reply(apiClient.Post(r.base+path, "application/json", strings.NewReader(body)))
}

func (r *pauseRig) get(path string) httpReply { return r.reply(apiClient.Get(r.base + path)) }

func (r *pauseRig) reply(res *http.Response, err error) httpReply {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return httpReply{status: res.StatusCode, body: b}
}

// run submits one batch of calls (all tools visible) and returns its result texts.
func (r *pauseRig) run(run string, calls ...contracts.ToolCall) []string {
	r.t.Helper()
	res := r.submit(run, calls...)
	out, err := res()
	if err != nil {
		r.t.Fatalf("results of %s: %v", run, err)
	}
	return out
}

func (r *pauseRig) submit(run string, calls ...contracts.ToolCall) func() ([]string, error) {
	r.t.Helper()
	ctx := ctxFor(r.t, waitLong)
	sub := contracts.BatchSubmission{RunID: run, ThreadID: "t-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"hold", "echo", "ask_hold"}}, Calls: calls}
	if _, err := r.client.Submit(ctx, sub); err != nil {
		r.t.Fatalf("submit %s: %v", run, err)
	}
	return func() ([]string, error) {
		res, err := r.client.Await(ctx, run, 1)
		if err != nil {
			return nil, err
		}
		return texts(res), nil
	}
}

// audits reads the tool pause audit records, oldest first.
func (r *pauseRig) audits() []contracts.ToolPauseAudit {
	r.t.Helper()
	names := r.cfg.Names()
	return auditsOn[contracts.ToolPauseAudit](r.t, r.srv.NATS, names, names.ToolPauseAuditSubject(), contracts.TypeToolPauseAudit)
}

// waitLong bounds every wait of the kill switch tests.
const waitLong = 30 * time.Second

const pausedText = "blocked: tool_paused: tool hold is paused: maintenance window"

// TestPauseTool is the kill switch end to end: a pause blocks the tool's new calls with a
// model-visible error naming the pause and its reason, while a call already running
// finishes; the pause is audited, shown in the catalog (and left out of the openai and
// mcp formats), survives a restart of the gate and the api, and a resume lets calls run
// again.
func TestPauseTool(t *testing.T) {
	r := newPauseRig(t)

	// A call of hold is running when the pause comes.
	running := r.submit("run-running", call("c1", "hold", HoldArgs{Block: true}))
	select {
	case <-r.entered:
	case <-time.After(waitLong):
		t.Fatal("hold never started")
	}
	res := r.post("/v1/tools/hold/pause", `{"reason":"maintenance window","actor":"oncall"}`)
	if res.status != http.StatusOK {
		t.Fatalf("pause: %d %s", res.status, res.body)
	}
	var st contracts.ToolPauseState
	res.json(t, &st)
	if !st.Paused || st.Pause == nil || st.Pause.Reason != "maintenance window" || st.Pause.Actor != "anonymous as oncall" {
		t.Fatalf("pause state: %s", res.body)
	}

	// New calls are blocked by name and reason; other tools of the batch run.
	if got := r.run("run-paused", call("c1", "hold", HoldArgs{}), call("c2", "echo", map[string]string{"text": "hi"})); got[0] != pausedText || got[1] != "hi" {
		t.Errorf("paused batch: %q", got)
	}
	// The running call finishes.
	close(r.release)
	if got, err := running(); err != nil || len(got) != 1 || got[0] != "held" {
		t.Errorf("running call: %q %v", got, err)
	}

	// The catalog shows the pause; the model-facing formats leave the tool out.
	var cat contracts.ToolCatalog
	r.get("/v1/tools").json(t, &cat)
	if !pausedIn(cat, "hold", "maintenance window") {
		t.Errorf("catalog: %+v", cat)
	}
	openai := r.get("/v1/tools?format=openai")
	if strings.Contains(string(openai.body), `"hold"`) || !strings.Contains(string(openai.body), `"echo"`) {
		t.Errorf("openai catalog lists the paused tool: %s", openai.body)
	}

	// The pause survives a restart of the gate and the api.
	r.restartFront()
	r.get("/v1/tools").json(t, &cat)
	if !pausedIn(cat, "hold", "maintenance window") {
		t.Errorf("catalog after restart: %+v", cat)
	}
	if got := r.run("run-after-restart", call("c1", "hold", HoldArgs{})); got[0] != pausedText {
		t.Errorf("after restart: %q", got)
	}

	// Resume (micro endpoint, as the CLI sends it): the tool runs again.
	st, err := r.client.ResumeTool(ctxFor(t, waitLong), "hold", "cli:test")
	if err != nil || st.Paused {
		t.Fatalf("resume: %+v %v", st, err)
	}
	if got := r.run("run-resumed", call("c1", "hold", HoldArgs{})); got[0] != "held" {
		t.Errorf("after resume: %q", got)
	}

	// Both are audited: who, when, why.
	audits := r.audits()
	if len(audits) != 2 || audits[0].Action != contracts.ToolPauseActionPause || audits[0].Actor != "anonymous as oncall" ||
		audits[0].Reason != "maintenance window" || audits[0].ToolID != "hold" || audits[0].At.IsZero() ||
		audits[1].Action != contracts.ToolPauseActionResume || audits[1].Actor != "nats as cli:test" {
		t.Errorf("audit records: %+v", audits)
	}

	// An unknown tool cannot be paused.
	if res := r.post("/v1/tools/nope/pause", `{}`); res.status != http.StatusNotFound {
		t.Errorf("pause of an unknown tool: %d %s", res.status, res.body)
	}
}

// TestPauseHoldsApprovedCall: a call parked for approval before the pause is not
// running; approved while its tool is paused, it completes with the pause's error.
func TestPauseHoldsApprovedCall(t *testing.T) {
	r := newPauseRig(t)
	ctx := ctxFor(t, waitLong)
	results := r.submit("run-ask", call("c1", "ask_hold", HoldArgs{}))
	tk, err := r.client.WaitTicket(ctx, "run-ask", 1, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.PauseTool(ctx, "ask_hold", "", "cli:test"); err != nil {
		t.Fatal(err)
	}
	if res := r.post("/v1/tickets/"+tk.CorrelationID+"/approve", `{}`); res.status != http.StatusOK {
		t.Fatalf("approve: %d %s", res.status, res.body)
	}
	got, err := results()
	if err != nil || got[0] != "blocked: tool_paused: tool ask_hold is paused" {
		t.Errorf("approved call of a paused tool: %q %v", got, err)
	}
}

func pausedIn(cat contracts.ToolCatalog, id, reason string) bool {
	for _, tl := range cat.Tools {
		if tl.ID == id {
			return tl.Paused && tl.Pause != nil && tl.Pause.Reason == reason
		}
	}
	return false
}
