package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// echoBatch is a one-call batch of run at step: echo returns text.
func echoBatch(run string, step int64, text string) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": text})},
	}
}

func resultTexts(b httpapi.BatchResults) []string {
	out := make([]string, len(b.Results))
	for i, r := range b.Results {
		out[i] = r.Output.Text()
	}
	return out
}

// streamState is the current state of the stream named.
func (h *harness) streamState(name string) jetstream.StreamState {
	h.t.Helper()
	ctx := ctxFor(h.t, waitLong)
	st, err := h.stack.Env.JS.Stream(ctx, name)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State
}

// submissions is the number of messages the submissions stream ever stored (its last
// sequence): what tells a refused request from one that reached the batcher.
func (h *harness) submissions() uint64 {
	return h.streamState(h.stack.Env.Names.SubmissionsStream()).LastSeq
}

// resultsConsumers is the number of consumers of the results stream.
func (h *harness) resultsConsumers() int {
	return h.streamState(h.stack.Env.Names.ResultsStream()).Consumers
}

// TestHTTPBatchSubmitWaitAndRead: a batch posted with wait comes back 200 with its results
// in model order and its finalized event; one posted without wait is accepted (202) and
// its results are then readable at GET /v1/batches/{id}/results (202 pending until
// published, 200 after); an unknown batch is 404 and a malformed id 400; the existing
// GET /v1/batches/{id} still shows the call records.
func TestHTTPBatchSubmitWaitAndRead(t *testing.T) {
	h := newHarness(t, api.Options{})

	sub := echoBatch("run-door", 1, "over http")
	sub.Calls = append(sub.Calls, call("c2", "counter", map[string]string{"name": "run-door"}))
	sub.Agent.Tools = append(sub.Agent.Tools, "counter")
	r := h.post("/v1/batches?wait=30s", string(mustJSON(sub)))
	if r.status != http.StatusOK {
		t.Fatalf("POST wait: %d %s", r.status, r.body)
	}
	var got httpapi.BatchResults
	r.json(t, &got)
	if got.BatchID != sub.BatchID() || got.Finalized.BatchID != sub.BatchID() ||
		!slices.Equal(got.Finalized.CallIDs, []string{"c1", "c2"}) || !slices.Equal(resultTexts(got), []string{"over http", "1"}) {
		t.Fatalf("waited body = %s", r.body)
	}
	for i, res := range got.Results {
		if res.Index != i || res.CallID != sub.Calls[i].CallID || res.Outcome != contracts.OutcomeCompleted {
			t.Fatalf("result %d = %+v", i, res)
		}
	}
	r = h.get("/v1/batches/" + sub.BatchID() + "/results")
	var again httpapi.BatchResults
	if r.status != http.StatusOK {
		t.Fatalf("GET results: %d %s", r.status, r.body)
	}
	r.json(t, &again)
	if !slices.Equal(resultTexts(again), resultTexts(got)) || again.Finalized.BatchID != sub.BatchID() {
		t.Fatalf("GET results = %s", r.body)
	}
	if v := h.batch(sub.BatchID()); len(v.Calls) != 2 || v.Phase != contracts.BatchPhasePublished {
		t.Fatalf("GET /v1/batches/{id} = %+v", v)
	}

	// Without wait: accepted, then published.
	later := echoBatch("run-door-async", 1, "accepted")
	r = h.post("/v1/batches", string(mustJSON(later)))
	var acc map[string]any
	r.json(t, &acc)
	if r.status != http.StatusAccepted || len(acc) != 1 || acc["batch_id"] != later.BatchID() {
		t.Fatalf("POST without wait: %d %s", r.status, r.body)
	}
	natstest.WaitFor(t, waitLong, func() bool {
		r = h.get("/v1/batches/" + later.BatchID() + "/results")
		return r.status == http.StatusOK
	}, "the accepted batch's results")
	r.json(t, &again)
	if !slices.Equal(resultTexts(again), []string{"accepted"}) {
		t.Fatalf("results = %s", r.body)
	}

	r = h.get("/v1/batches/" + contracts.BatchID("run-never", 1) + "/results")
	if e := r.apiError(t); r.status != http.StatusNotFound || e.Code != httpapi.CodeNotFound {
		t.Fatalf("unknown batch: %d %s", r.status, r.body)
	}
	r = h.get("/v1/batches/not-a-batch/results")
	if e := r.apiError(t); r.status != http.StatusBadRequest || e.Code != httpapi.CodeInvalidRequest {
		t.Fatalf("malformed batch id: %d %s", r.status, r.body)
	}
}

// TestHTTPBatchWaitEndsPending: a batch parked on an approval is still pending when the
// wait ends (202 pending); its results read 202 pending until the ticket is approved over
// HTTP, then 200 in model order.
func TestHTTPBatchWaitEndsPending(t *testing.T) {
	h := newHarness(t, api.Options{})
	sub := approvalBatch("run-door-pending", map[string]string{"why": "a human"})
	r := h.post("/v1/batches?wait=200ms", string(mustJSON(sub)))
	var p httpapi.BatchPending
	r.json(t, &p)
	if r.status != http.StatusAccepted || p.BatchID != sub.BatchID() || p.Status != httpapi.StatusPending {
		t.Fatalf("POST wait on a parked batch: %d %s", r.status, r.body)
	}
	tk, err := h.client.WaitTicket(ctxFor(t, waitLong), sub.RunID, 1, "c2")
	if err != nil {
		t.Fatal(err)
	}
	r = h.get("/v1/batches/" + sub.BatchID() + "/results")
	r.json(t, &p)
	if r.status != http.StatusAccepted || p.Status != httpapi.StatusPending {
		t.Fatalf("GET results of a parked batch: %d %s", r.status, r.body)
	}
	if r = h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "{}"); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	natstest.WaitFor(t, waitLong, func() bool {
		r = h.get("/v1/batches/" + sub.BatchID() + "/results")
		return r.status == http.StatusOK
	}, "the approved batch's results")
	var got httpapi.BatchResults
	r.json(t, &got)
	if want := []string{"before approval", "ran ask_me", "1"}; !slices.Equal(resultTexts(got), want) {
		t.Fatalf("results = %q, want %q", resultTexts(got), want)
	}
}

// TestHTTPBatchRefusals: every refusal that needs no state is answered at once with 400
// and the batcher's code, and nothing reaches the submissions stream; a bad wait is
// refused too.
func TestHTTPBatchRefusals(t *testing.T) {
	h := newHarness(t, api.Options{})
	valid := string(mustJSON(echoBatch("run-refused", 1, "x")))
	deep := `{"run_id":"r","thread_id":"t","step":1,"agent":{"snapshot_id":"s"},"calls":[{"call_id":"c","tool_id":"echo","arguments":` +
		strings.Repeat("[", contracts.MaxJSONDepth+1) + strings.Repeat("]", contracts.MaxJSONDepth+1) + `}]}`
	sub := func(edit func(*contracts.BatchSubmission)) string {
		s := echoBatch("run-refused", 1, "x")
		edit(&s)
		return string(mustJSON(s))
	}
	tests := []struct {
		name, query, body string
		wantCode          string
	}{
		{"not JSON", "", `{"run_id":`, string(contracts.RejectInvalidJSON)},
		{"duplicate key", "", `{"run_id":"a","run_id":"b"}`, string(contracts.RejectInvalidJSON)},
		{"unknown field", "", strings.Replace(valid, `"run_id"`, `"surprise":1,"run_id"`, 1), string(contracts.RejectUnknownField)},
		{"bad run id", "", sub(func(s *contracts.BatchSubmission) { s.RunID = "a b" }), string(contracts.RejectInvalidID)},
		{"bad call id", "", sub(func(s *contracts.BatchSubmission) { s.Calls[0].CallID = "c\x001" }), string(contracts.RejectInvalidID)},
		{"negative step", "", sub(func(s *contracts.BatchSubmission) { s.Step = -1 }), string(contracts.RejectInvalidStep)},
		{"no calls", "", sub(func(s *contracts.BatchSubmission) { s.Calls = nil }), string(contracts.RejectEmptyBatch)},
		{"duplicate call", "", sub(func(s *contracts.BatchSubmission) { s.Calls = append(s.Calls, s.Calls[0]) }), string(contracts.RejectDuplicateCall)},
		{"bad tool id", "", sub(func(s *contracts.BatchSubmission) { s.Calls[0].ToolID = "bad\ttool" }), string(contracts.RejectInvalidField)},
		{"too deep", "", deep, string(contracts.RejectTooDeep)},
		{"too large", "", `{"run_id":"` + strings.Repeat("a", contracts.MaxSubmissionBytes) + `"}`, string(contracts.RejectTooLarge)},
		{"too large and refused with wait", "?wait=5s", `{"pad":"` + strings.Repeat("a", 2*contracts.MaxSubmissionBytes) + `"}`, string(contracts.RejectTooLarge)},
		{"wait too long", "?wait=61s", valid, httpapi.CodeInvalidRequest},
		{"wait negative", "?wait=-1s", valid, httpapi.CodeInvalidRequest},
		{"wait not a duration", "?wait=soon", valid, httpapi.CodeInvalidRequest},
	}
	before := h.submissions()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.post("/v1/batches"+tt.query, tt.body)
			if e := r.apiError(t); r.status != http.StatusBadRequest || e.Code != tt.wantCode || e.Message == "" {
				t.Fatalf("got %d %s, want 400 %s", r.status, r.body, tt.wantCode)
			}
		})
	}
	if after := h.submissions(); after != before {
		t.Fatalf("refused requests reached the submissions stream: %d messages before, %d after", before, after)
	}
}

// subscribedTo reports whether some connection to the server subscribes to subject.
func (h *harness) subscribedTo(subject string) bool {
	h.t.Helper()
	cz, err := h.srv.NATS.Server().Connz(&server.ConnzOptions{Subscriptions: true})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range cz.Conns {
		if slices.Contains(c.Subs, subject) {
			return true
		}
	}
	return false
}

// TestHTTPBatchConflictWithWait: another content under a batch id already submitted is
// answered 409 conflict when the caller waits (the batcher's refusal, heard on the
// rejected subject), while a caller waiting on the original content is not given that
// refusal — rejections are matched by the submission's event id, not its batch id — and
// gets its results once the batch is approved.
func TestHTTPBatchConflictWithWait(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-door-conflict"
	orig := approvalBatch(run, map[string]string{})
	if r := h.post("/v1/batches", string(mustJSON(orig))); r.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	tk, err := h.client.WaitTicket(ctxFor(t, waitLong), run, 1, "c2")
	if err != nil {
		t.Fatal(err)
	}
	// A second caller waits on the original content (an identical resubmission).
	origDone := make(chan response, 1)
	go func() { origDone <- h.post("/v1/batches?wait=60s", string(mustJSON(orig))) }()
	natstest.WaitFor(t, waitLong, func() bool { return h.subscribedTo(h.stack.Env.Names.RejectedSubject()) },
		"the waiting caller listening for rejections")

	other := approvalBatch(run, map[string]string{"other": "content"})
	r := h.post("/v1/batches?wait=30s", string(mustJSON(other)))
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != string(contracts.RejectConflict) {
		t.Fatalf("conflicting POST with wait: %d %s, want 409 conflict", r.status, r.body)
	}
	// Without wait the stateful refusal cannot be known: accepted, and refused later.
	if r := h.post("/v1/batches", string(mustJSON(other))); r.status != http.StatusAccepted {
		t.Fatalf("conflicting POST without wait: %d %s", r.status, r.body)
	}
	select {
	case r := <-origDone:
		t.Fatalf("the caller waiting on the original content was answered before the approval: %d %s", r.status, r.body)
	default:
	}
	if r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "{}"); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	r = <-origDone
	var got httpapi.BatchResults
	if r.status != http.StatusOK {
		t.Fatalf("the original caller: %d %s, want 200", r.status, r.body)
	}
	r.json(t, &got)
	if want := []string{"before approval", "ran ask_me", "1"}; !slices.Equal(resultTexts(got), want) {
		t.Fatalf("results = %q, want %q", resultTexts(got), want)
	}
}

// TestHTTPBatchDoorSecurity: the batch routes need the bearer token, and a submission
// that a cross-site page could send (foreign Origin, Sec-Fetch-Site cross-site, a form or
// text/plain body, a DNS-rebound Host) is refused before anything is published.
func TestHTTPBatchDoorSecurity(t *testing.T) {
	const token = "door-token"
	h := newHarness(t, api.Options{Token: token})
	body := string(mustJSON(echoBatch("run-door-sec", 1, "x")))
	bearer := "Bearer " + token
	port := strings.Split(strings.TrimPrefix(h.base, "http://"), ":")[1]
	tests := []struct {
		name, method, path, body string
		headers                  map[string]string
		wantStatus               int
		wantCode                 string
	}{
		{"submit without token", "POST", "/v1/batches", body, nil, 401, httpapi.CodeUnauthorized},
		{"submit and wait with a wrong token", "POST", "/v1/batches?wait=1s", body, map[string]string{"Authorization": "Bearer nope"}, 401, httpapi.CodeUnauthorized},
		{"results without token", "GET", "/v1/batches/" + contracts.BatchID("run-door-sec", 1) + "/results", "", nil, 401, httpapi.CodeUnauthorized},
		{"run results without token", "GET", "/v1/runs/run-door-sec/results", "", nil, 401, httpapi.CodeUnauthorized},
		{"cross-site submit", "POST", "/v1/batches", body, map[string]string{"Authorization": bearer, "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403, httpapi.CodeForbidden},
		{"foreign origin", "POST", "/v1/batches?wait=1s", body, map[string]string{"Authorization": bearer, "Origin": "https://evil.example"}, 403, httpapi.CodeForbidden},
		{"form post", "POST", "/v1/batches", "x=1", map[string]string{"Authorization": bearer, "Content-Type": "application/x-www-form-urlencoded"}, 415, httpapi.CodeUnsupportedMediaType},
		{"text/plain", "POST", "/v1/batches", body, map[string]string{"Authorization": bearer, "Content-Type": "text/plain"}, 415, httpapi.CodeUnsupportedMediaType},
		{"rebound host", "POST", "/v1/batches", body, map[string]string{"Authorization": bearer, "Host": "evil.example:" + port}, 403, httpapi.CodeForbidden},
		{"rebound host reading results", "GET", "/v1/runs/run-door-sec/results", "", map[string]string{"Authorization": bearer, "Host": "evil.example"}, 403, httpapi.CodeForbidden},
		{"wrong method", "PUT", "/v1/batches", body, map[string]string{"Authorization": bearer, "Sec-Fetch-Site": "same-origin"}, 405, httpapi.CodeMethodNotAllowed},
	}
	before := h.submissions()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(tt.method, tt.path, tt.body, tt.headers)
			if e := r.apiError(t); r.status != tt.wantStatus || e.Code != tt.wantCode {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.wantStatus, tt.wantCode)
			}
		})
	}
	if after := h.submissions(); after != before {
		t.Fatalf("a refused request reached the submissions stream (%d → %d)", before, after)
	}
	r := h.do("POST", "/v1/batches?wait=30s", body, map[string]string{"Authorization": bearer, "Sec-Fetch-Site": "same-origin", "Origin": h.base})
	if r.status != http.StatusOK {
		t.Fatalf("authenticated same-origin submit: %d %s", r.status, r.body)
	}
}

// sseEvent is one server-sent event as a client parses it.
type sseEvent struct {
	id, name, data string
}

// sseStream reads the events of an open stream until ctx ends or the stream does.
func sseStream(ctx context.Context, res *http.Response) <-chan sseEvent {
	out := make(chan sseEvent)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// openRunResults opens GET /v1/runs/{run}/results, resuming after lastID when set. The
// returned cancel disconnects.
func (h *harness) openRunResults(run, lastID string) (<-chan sseEvent, context.CancelFunc) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(ctxFor(h.t, waitLong))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/v1/runs/"+run+"/results", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := (&http.Client{}).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		res.Body.Close()
		h.t.Fatalf("run results: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return sseStream(ctx, res), cancel
}

// nextBatch reads the next batch event.
func (h *harness) nextBatch(events <-chan sseEvent) (sseEvent, httpapi.BatchResults) {
	h.t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			h.t.Fatal("the run results stream ended")
		}
		if ev.name != httpapi.EventRunBatch || ev.id == "" {
			h.t.Fatalf("event %+v, want a batch event with an id", ev)
		}
		var b httpapi.BatchResults
		response{body: []byte(ev.data)}.json(h.t, &b)
		return ev, b
	case <-ctxFor(h.t, waitLong).Done():
		h.t.Fatal("no batch event")
	}
	panic("unreachable")
}

// TestHTTPRunResultsResumeWithLastEventID: a reader of a run's results stream gets one
// batch event per published batch, in order; it disconnects mid-run, batches are
// published meanwhile, and reconnecting with Last-Event-ID resumes exactly after the last
// batch it saw — every batch of the run is seen exactly once. A reader without
// Last-Event-ID gets the run from its first batch; a bad Last-Event-ID or run id is 400.
func TestHTTPRunResultsResumeWithLastEventID(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-door-sse"
	submit := func(step int64) {
		t.Helper()
		if r := h.post("/v1/batches?wait=30s", string(mustJSON(echoBatch(run, step, fmt.Sprint("step ", step))))); r.status != http.StatusOK {
			t.Fatalf("POST step %d: %d %s", step, r.status, r.body)
		}
	}
	var seen []string
	var lastID string
	see := func(events <-chan sseEvent) {
		t.Helper()
		ev, b := h.nextBatch(events)
		if want := fmt.Sprint("step ", len(seen)+1); !slices.Equal(resultTexts(b), []string{want}) || b.Finalized.BatchID != b.BatchID {
			t.Fatalf("batch event %d = %s, want %q", len(seen)+1, ev.data, want)
		}
		if lastID != "" {
			prev, _ := strconv.ParseUint(lastID, 10, 64)
			if cur, err := strconv.ParseUint(ev.id, 10, 64); err != nil || cur <= prev {
				t.Fatalf("event id %q after %q", ev.id, lastID)
			}
		}
		seen = append(seen, b.BatchID)
		lastID = ev.id
	}

	events, disconnect := h.openRunResults(run, "")
	submit(1)
	submit(2)
	see(events)
	see(events)
	disconnect()
	// Published while nobody listens.
	submit(3)
	submit(4)
	events, disconnect = h.openRunResults(run, lastID)
	see(events)
	see(events)
	submit(5)
	see(events)
	disconnect()
	want := []string{}
	for step := int64(1); step <= 5; step++ {
		want = append(want, contracts.BatchID(run, step))
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("batches seen %q, want each of %q once", seen, want)
	}
	// A reconnect after the last batch gets nothing more until another is published.
	events, disconnect = h.openRunResults(run, lastID)
	defer disconnect()
	submit(6)
	see(events)
	if seen[5] != contracts.BatchID(run, 6) {
		t.Fatalf("after the last batch: %q", seen[5])
	}

	// From the start.
	fresh, stop := h.openRunResults(run, "")
	defer stop()
	if _, b := h.nextBatch(fresh); b.BatchID != contracts.BatchID(run, 1) {
		t.Fatalf("a new reader starts at %s", b.BatchID)
	}

	// Readers that went away leave nothing behind: their ordered consumers are deleted.
	disconnect()
	stop()
	natstest.WaitFor(t, waitLong, func() bool { return h.resultsConsumers() == 0 }, "the run streams' consumers deleted")

	for _, tt := range []struct{ path, lastID string }{
		{"/v1/runs/" + run + "/results", "not-a-number"},
		{"/v1/runs/a%20b/results", ""},
	} {
		r := h.do(http.MethodGet, tt.path, "", map[string]string{"Last-Event-ID": tt.lastID})
		if e := r.apiError(t); r.status != http.StatusBadRequest || e.Code != httpapi.CodeInvalidRequest {
			t.Fatalf("GET %s (Last-Event-ID %q): %d %s", tt.path, tt.lastID, r.status, r.body)
		}
	}
}

// counterBatch is a one-call batch of run at step: the counter named after the run
// counts one more, so its result says how often the batches of the run really ran.
func counterBatch(run string, step int64) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"counter"}},
		Calls: []contracts.ToolCall{call("c1", "counter", map[string]string{"name": run})},
	}
}

// TestHTTPBatchRetryAfterRunBusy: a batch refused with run_busy (its run's earlier batch
// is parked) is refused again when POSTed again — with wait, the way an HTTP client learns
// why a batch it POSTed without wait never appeared — and is POSTed again, identical, once the run is free, well inside the stream's
// duplicate window: the retry reaches the batcher (every POST has an event id of its own)
// and runs; a further identical POST is a no-op that answers the same results, and the
// counter proves the batch ran once.
func TestHTTPBatchRetryAfterRunBusy(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-door-busy"
	tk := h.park(run, map[string]string{})

	next := string(mustJSON(counterBatch(run, 2)))
	r := h.post("/v1/batches?wait=30s", next)
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != string(contracts.RejectRunBusy) {
		t.Fatalf("POST while the run is busy: %d %s, want 409 run_busy", r.status, r.body)
	}
	// Without wait the refusal is not seen: 202, and the results route knows no such batch.
	// The documented way to learn why is to POST the same body again with wait: it reaches
	// the batcher again and is refused again.
	if r := h.post("/v1/batches", next); r.status != http.StatusAccepted {
		t.Fatalf("POST without wait while the run is busy: %d %s, want 202", r.status, r.body)
	}
	if r := h.get("/v1/batches/" + contracts.BatchID(run, 2) + "/results"); r.status != http.StatusNotFound {
		t.Fatalf("results of the refused batch: %d %s, want 404", r.status, r.body)
	}
	r = h.post("/v1/batches?wait=20s", next)
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != string(contracts.RejectRunBusy) {
		t.Fatalf("the same POST again with wait: %d %s, want 409 run_busy", r.status, r.body)
	}
	if r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "{}"); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	natstest.WaitFor(t, waitLong, func() bool {
		return h.get("/v1/batches/"+contracts.BatchID(run, 1)+"/results").status == http.StatusOK
	}, "the first batch's results")

	for i, want := range []string{"2", "2"} { // the retry runs; the identical POST after it is a no-op
		r = h.post("/v1/batches?wait=20s", next)
		var got httpapi.BatchResults
		if r.status != http.StatusOK {
			t.Fatalf("identical POST %d after the run was free: %d %s, want 200", i+1, r.status, r.body)
		}
		r.json(t, &got)
		if texts := resultTexts(got); !slices.Equal(texts, []string{want}) {
			t.Fatalf("identical POST %d: results %q, want [%q]", i+1, texts, want)
		}
	}
	r = h.post("/v1/batches?wait=20s", string(mustJSON(counterBatch(run, 3))))
	var got httpapi.BatchResults
	r.json(t, &got)
	if texts := resultTexts(got); r.status != http.StatusOK || !slices.Equal(texts, []string{"3"}) {
		t.Fatalf("the next batch: %d %q, want 200 [\"3\"] (step 2 ran exactly once)", r.status, texts)
	}
}

// TestHTTPResubmitPublishedBatchAnswersAtOnce: posting with wait a batch that is already
// published, with the same content, answers 200 with its stored results without publishing
// the submission again — nothing is left to wait for (the batcher would settle an identical
// resubmission without new results or a rejection, which a waiting door can only notice by
// asking later). A resubmission with other content still reaches the batcher: 409 conflict.
func TestHTTPResubmitPublishedBatchAnswersAtOnce(t *testing.T) {
	h := newHarness(t, api.Options{})
	sub := echoBatch("run-door-again", 1, "once")
	first := h.post("/v1/batches?wait=30s", string(mustJSON(sub)))
	if first.status != http.StatusOK {
		t.Fatalf("first POST: %d %s", first.status, first.body)
	}
	var want httpapi.BatchResults
	first.json(t, &want)
	before := h.submissions()
	again := h.post("/v1/batches?wait=60s", string(mustJSON(sub)))
	if again.status != http.StatusOK {
		t.Fatalf("resubmission: %d %s", again.status, again.body)
	}
	var got httpapi.BatchResults
	again.json(t, &got)
	if got.BatchID != sub.BatchID() || !slices.Equal(resultTexts(got), resultTexts(want)) || got.Finalized.BatchID != sub.BatchID() {
		t.Fatalf("resubmission answered %s, want the published results %s", again.body, first.body)
	}
	if after := h.submissions(); after != before {
		t.Fatalf("the resubmission of a published batch was published again (submissions stream %d -> %d) "+
			"and waited for an answer that never comes, instead of answering from the stored results", before, after)
	}
	other := echoBatch("run-door-again", 1, "other content")
	if r := h.post("/v1/batches?wait=30s", string(mustJSON(other))); r.status != http.StatusConflict || r.apiError(t).Code != string(contracts.RejectConflict) {
		t.Fatalf("other content under the published batch id: %d %s, want 409 conflict", r.status, r.body)
	}
}

// TestHTTPBatchPendingNamesItsTickets: a waiting POST of a batch parked on an approval
// ends 202 pending naming the open ticket that holds it — correlation id, call, tool, kind
// and deadline — and so does GET /v1/batches/{id}/results, so an HTTP caller knows what to
// approve without a second request.
func TestHTTPBatchPendingNamesItsTickets(t *testing.T) {
	h := newHarness(t, api.Options{})
	tk := h.park("run-door-tickets", map[string]string{"why": "a human"})
	sub := approvalBatch("run-door-tickets", map[string]string{"why": "a human"})
	type pendingTicket struct {
		CorrelationID string     `json:"correlation_id"`
		CallID        string     `json:"call_id"`
		ToolID        string     `json:"tool_id"`
		Kind          string     `json:"kind"`
		Deadline      *time.Time `json:"deadline"`
	}
	type pending struct {
		BatchID string          `json:"batch_id"`
		Status  string          `json:"status"`
		Tickets []pendingTicket `json:"tickets"`
	}
	for name, r := range map[string]response{
		"POST ?wait=200ms": h.post("/v1/batches?wait=200ms", string(mustJSON(sub))),
		"GET results":      h.get("/v1/batches/" + sub.BatchID() + "/results"),
	} {
		var p pending
		r.json(t, &p)
		want := pendingTicket{CorrelationID: tk.CorrelationID, CallID: "c2", ToolID: "ask_me", Kind: string(contracts.ReasonPermission), Deadline: tk.Deadline}
		if r.status != http.StatusAccepted || p.Status != httpapi.StatusPending || len(p.Tickets) != 1 ||
			p.Tickets[0].CorrelationID != want.CorrelationID || p.Tickets[0].CallID != want.CallID || p.Tickets[0].ToolID != want.ToolID ||
			p.Tickets[0].Kind != want.Kind || (want.Deadline == nil) != (p.Tickets[0].Deadline == nil) {
			t.Errorf("%s on a parked batch: %d %s, want 202 pending naming the ticket %+v", name, r.status, r.body, want)
		}
	}
}
