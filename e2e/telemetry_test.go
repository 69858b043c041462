package e2e_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// series matches one sample line of the Prometheus text format: name{labels} value.
var series = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)

// scrape reads /metrics from base and returns every sample keyed by name{sorted labels}.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		m := series.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		labels := strings.Trim(m[2], "{}")
		parts := strings.Split(labels, ",")
		sort.Strings(parts)
		out[m[1]+"{"+strings.Join(parts, ",")+"}"] = v
	}
	return out
}

// key renders a series key as scrape does: labels given as k="v" pairs, sorted.
func key(name string, labels ...string) string {
	sort.Strings(labels)
	return name + "{" + strings.Join(labels, ",") + "}"
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsMoveAsABatchFlows scrapes the operations listener of a real stack before and
// after batches cross the pipeline and checks that the counters of every layer moved:
// the consume loops, the gate's decisions, the published calls by outcome, the batches by
// state, and the open-ticket gauges.
func TestMetricsMoveAsABatchFlows(t *testing.T) {
	h := newHarness(t, withOptions(func(o *app.Options) { o.HTTPAddr = "127.0.0.1:0" }))
	base := "http://" + h.stack.HTTPAddr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %s", code, body)
	}

	before := scrape(t, base)
	// echo runs in brain-exec, wc in sandbox-exec with an argument of the wrong type (an
	// error result from its configured schema, before the module is entered), forbidden is
	// denied by the host policy.
	res := h.mustRun(batch("metrics-1", 1, []string{"echo", "wc", "forbidden"},
		call("c1", "echo", map[string]string{"text": "hi"}),
		call("c2", "wc", map[string]any{"text": 5}),
		call("c3", "forbidden", map[string]string{})))
	if len(res.Results) != 3 {
		t.Fatalf("results = %d, want 3", len(res.Results))
	}
	rows := []struct {
		name   string
		series string
		delta  float64
	}{
		{"batch accepted", key(telemetry.MetricBatches, `state="accepted"`, `code=""`), 1},
		{"batch published", key(telemetry.MetricBatches, `state="published"`, `code=""`), 1},
		{"two allow decisions", key(telemetry.MetricGateDecisions, `decision="allow"`), 2},
		{"one deny decision", key(telemetry.MetricGateDecisions, `decision="deny"`), 1},
		{"echo completed without error", key(telemetry.MetricCalls, `outcome="completed"`, `is_error="false"`), 1},
		{"wc and forbidden completed with an error", key(telemetry.MetricCalls, `outcome="completed"`, `is_error="true"`), 2},
		{"submission acked", key(telemetry.MetricMessages, `consumer="`+contracts.ConsumerBatcherSubmit+`"`, `result="ack"`), 1},
		{"three outputs published", key(telemetry.MetricMessages, `consumer="`+contracts.ConsumerPublisher+`"`, `result="ack"`), 3},
		{"publisher handler timed", key(telemetry.MetricHandlerDuration+"_count", `consumer="`+contracts.ConsumerPublisher+`"`), 3},
	}
	// The client sees the results as soon as they are on the stream; the publisher marks
	// the batch published, acks its inputs and observes its handlers a moment later, each
	// counter on its own. Wait until every row has moved at least as far as it should, then
	// check that none moved further.
	var after map[string]float64
	natstest.WaitFor(t, 30*time.Second, func() bool {
		after = scrape(t, base)
		for _, r := range rows {
			if after[r.series]-before[r.series] < r.delta {
				return false
			}
		}
		return true
	}, "every counter of the batch to move")
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			if got := after[r.series] - before[r.series]; got != r.delta {
				t.Errorf("%s moved by %v, want %v", r.series, got, r.delta)
			}
		})
	}

	// A parked call shows as an open ticket; the gauge is computed at scrape time.
	h.submitUntilParked(ctxFor(t, 30*time.Second), batch("metrics-2", 1, []string{"ask_me"}, call("a1", "ask_me", map[string]string{})), "a1")
	open := scrape(t, base)
	if got := open[key(telemetry.MetricTicketsOpen)]; got != 1 {
		t.Errorf("%s = %v, want 1", telemetry.MetricTicketsOpen, got)
	}
	if got := open[key(telemetry.MetricGateDecisions, `decision="ask"`)] - after[key(telemetry.MetricGateDecisions, `decision="ask"`)]; got != 1 {
		t.Errorf("ask decisions moved by %v, want 1", got)
	}
	if _, ok := open[key(telemetry.MetricTicketOldestAge)]; !ok {
		t.Errorf("%s missing", telemetry.MetricTicketOldestAge)
	}
	// The approval is a decision too, and the ticket closes.
	ticket, err := h.client.Ticket(ctxFor(t, 10*time.Second), "perm.metrics-2.1.a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Approve(ctxFor(t, 30*time.Second), ticket, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Await(ctxFor(t, 30*time.Second), "metrics-2", 1); err != nil {
		t.Fatal(err)
	}
	approved := scrape(t, base)
	if got := approved[key(telemetry.MetricGateDecisions, `decision="approved"`)] - open[key(telemetry.MetricGateDecisions, `decision="approved"`)]; got != 1 {
		t.Errorf("approved decisions moved by %v, want 1", got)
	}
	if got := approved[key(telemetry.MetricTicketsOpen)]; got != 0 {
		t.Errorf("%s = %v after the approval, want 0", telemetry.MetricTicketsOpen, got)
	}

	// Not ready once stopped.
	if err := h.stack.Stop(ctxFor(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := h.stack.Ready(context.Background()); err == nil {
		t.Error("a stopped stack reports ready")
	}
	h.stack = nil
}

// TestOneTracePerBatch runs a batch that crosses all five services with an in-memory span
// exporter and checks that every span of the batch belongs to ONE connected trace whose
// root is the batcher's span, which continues the traceparent the platform sent.
func TestOneTracePerBatch(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, withOptions(func(o *app.Options) { o.TracerProvider = tp }))

	// The platform's own span: the batch must continue its trace.
	platformCtx, platformSpan := tp.Tracer("platform").Start(context.Background(), "agent step")
	platformSpan.End()
	sub := batch("trace-1", 1, []string{"echo", "wc"},
		call("c1", "echo", map[string]string{"text": "hi"}),
		call("c2", "wc", map[string]string{"text": "a b"}))
	ev, err := cloudevent.NewEvent(sub.BatchID()+":"+sub.Hash()[:16], "platform/test", contracts.TypeBatchRequested, sub)
	if err != nil {
		t.Fatal(err)
	}
	platform := telemetry.New("platform", nil, tp)
	_, js := h.srv.Conn(t)
	pub := bus.NewPublisher(js).WithInjector(platform.Inject)
	if _, err := pub.Publish(platformCtx, h.cfg.Names().SubmitSubject(), ev); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Await(ctxFor(t, 60*time.Second), sub.RunID, sub.Step); err != nil {
		t.Fatal(err)
	}

	batchID := sub.BatchID()
	ofBatch := func() []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			for _, a := range s.Attributes {
				if a.Key == "awaken.batch_id" && a.Value.AsString() == batchID {
					out = append(out, s)
				}
			}
		}
		return out
	}
	// The publisher's span of the last output ends after the results are published; the
	// client can see them a moment before it ends, so wait for it.
	want := map[string]bool{contracts.ServiceBatcher: true, contracts.ServiceGate: true, contracts.ServiceBrainExec: true, contracts.ServiceSandboxExec: true, contracts.ServicePublisher: true}
	servicesOf := func(spans []tracetest.SpanStub) map[string]int {
		seen := map[string]int{}
		for _, s := range spans {
			for _, a := range s.Attributes {
				if a.Key == attribute.Key("awaken.service") {
					seen[a.Value.AsString()]++
				}
			}
		}
		return seen
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		return servicesOf(ofBatch())[contracts.ServicePublisher] >= 2 // one span per call output
	}, "the publisher's spans of both call outputs")
	spans := ofBatch()
	seen := servicesOf(spans)
	for svc := range want {
		if seen[svc] == 0 {
			t.Errorf("no span from %s (spans by service: %v)", svc, seen)
		}
	}

	traceID := platformSpan.SpanContext().TraceID()
	ids := map[trace.SpanID]bool{platformSpan.SpanContext().SpanID(): true}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	roots := 0
	for _, s := range spans {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %s (%v) is in trace %s, want the platform's %s", s.Name, servicesOf([]tracetest.SpanStub{s}), s.SpanContext.TraceID(), traceID)
		}
		if !ids[s.Parent.SpanID()] {
			t.Errorf("span %s has parent %s, which is not a span of the batch (disconnected)", s.Name, s.Parent.SpanID())
		}
		if s.Parent.SpanID() == platformSpan.SpanContext().SpanID() {
			roots++
			if s.Name != contracts.ConsumerBatcherSubmit {
				t.Errorf("the platform's child is %s, want the batcher's %s", s.Name, contracts.ConsumerBatcherSubmit)
			}
		}
	}
	if roots != 1 {
		t.Errorf("%d spans continue the platform's span, want exactly 1 (the batch root)", roots)
	}
	t.Logf("%d spans in one trace; by service: %v", len(spans), seen)
}

// An approval arrives in a trace of its own (the approver's), but what it sets off — the
// parked call's execution and every later call — continues the batch's trace.
func TestOneTracePerBatch_acrossAnApproval(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarness(t, withOptions(func(o *app.Options) { o.TracerProvider = tp }))
	ctx := ctxFor(t, 60*time.Second)
	run := "trace-approval"
	sub := batch(run, 1, []string{"ask_me", "echo"},
		call("c1", "ask_me", map[string]string{}),
		call("c2", "echo", map[string]string{"text": "after"}))
	ticket := h.submitUntilParked(ctx, sub, "c1")
	if _, err := h.client.Approve(ctx, ticket, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Await(ctx, run, 1); err != nil {
		t.Fatal(err)
	}
	batchID := sub.BatchID()
	spans := func() (root trace.TraceID, others []tracetest.SpanStub) {
		for _, s := range exp.GetSpans() {
			for _, a := range s.Attributes {
				if a.Key == "awaken.batch_id" && a.Value.AsString() == batchID {
					if s.Name == contracts.ConsumerBatcherSubmit {
						root = s.SpanContext.TraceID()
					} else if s.Name != contracts.ConsumerGateResume {
						others = append(others, s)
					}
				}
			}
		}
		return root, others
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		_, others := spans()
		n := 0
		for _, s := range others {
			if s.Name == contracts.ConsumerPublisher {
				n++
			}
		}
		return n >= 2
	}, "the publisher's spans of both call outputs")
	root, others := spans()
	if !root.IsValid() {
		t.Fatal("no batcher span")
	}
	execs := 0
	for _, s := range others {
		if s.SpanContext.TraceID() != root {
			t.Errorf("span %s is in trace %s, want the batch's %s", s.Name, s.SpanContext.TraceID(), root)
		}
		if s.Name == contracts.ConsumerBrainExec {
			execs++
		}
	}
	if execs != 2 {
		t.Errorf("%d brain-exec spans in the batch's trace, want 2 (the approved call and the one after it)", execs)
	}
}
