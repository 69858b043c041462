// Package e2e_test runs the whole pipeline — the five real services wired as in `awaken
// dev` — on a real embedded JetStream server and checks the product's promises through
// the public client.
package e2e_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// repoRoot is the module root, for the example files: a test runs in its package's
// directory (not runtime.Caller, whose file name is module-relative under -trimpath).
func repoRoot(tb testing.TB) string {
	dir, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// exampleConfig loads examples/awaken.yaml, the configuration `make run` uses, so the
// tests prove the shipped example works (its sandbox tools compiled once, by TestMain).
func exampleConfig(tb testing.TB) *config.Config {
	tb.Helper()
	cfg, err := config.Load(filepath.Join(repoRoot(tb), "examples", "awaken.yaml"))
	if err != nil {
		tb.Fatalf("load example config: %v", err)
	}
	// The tests count body runs (harness.ledger) and the checker reads the ledger.
	cfg.Executors.BodyLedger = true
	return cfg
}

type harness struct {
	// opts adjusts the app options of the stack (telemetry tests set a tracer provider
	// and an operations listener).
	opts   func(*app.Options)
	tb     testing.TB
	srv    *natstest.Server
	cfg    *config.Config
	stack  *stacktest.Stack
	client *client.Client
	faults atomic.Value // pipeline.FaultHook
}

type harnessOption func(*harness)

func withConfig(cfg *config.Config) harnessOption { return func(h *harness) { h.cfg = cfg } }

func withOptions(f func(*app.Options)) harnessOption { return func(h *harness) { h.opts = f } }

// newHarness starts an embedded server and the five services.
func newHarness(tb testing.TB, opts ...harnessOption) *harness {
	tb.Helper()
	h := &harness{tb: tb}
	for _, o := range opts {
		o(h)
	}
	if h.cfg == nil {
		h.cfg = exampleConfig(tb)
	}
	srv := stacktest.NewServer(tb)
	h.srv, h.client = srv.NATS, srv.Client
	o := app.Options{
		Config: h.cfg,
		Faults: func(ctx context.Context, service string, p pipeline.FaultPoint, op string) error {
			if f, ok := h.faults.Load().(pipeline.FaultHook); ok && f != nil {
				return f(ctx, service, p, op)
			}
			return nil
		},
	}
	if h.opts != nil {
		h.opts(&o)
	}
	h.stack = srv.StartStack(ctxFor(tb, stacktest.StartTimeout), o)
	return h
}

// setFaults installs a fault hook on every service (nil removes it).
func (h *harness) setFaults(f pipeline.FaultHook) { h.faults.Store(f) }

// start starts every service again, after a Kill.
func (h *harness) start() {
	h.tb.Helper()
	h.stack.StartAgain(ctxFor(h.tb, stacktest.StartTimeout))
}

// restart stops every service gracefully and starts them again.
func (h *harness) restart() {
	h.tb.Helper()
	h.stack.Restart(ctxFor(h.tb, stacktest.StartTimeout))
}

// ctxFor returns a context that ends after d or with the test.
var ctxFor = servicetest.Context

// call is a call of tool whose arguments are args as JSON.
var call = servicetest.CallJSON

func batch(run string, step int64, tools []string, calls ...contracts.ToolCall) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools},
		Calls: calls,
	}
}

// mustRun submits and waits for the results.
func (h *harness) mustRun(sub contracts.BatchSubmission) *client.BatchResult {
	h.tb.Helper()
	res, err := h.client.SubmitAndWait(ctxFor(h.tb, 60*time.Second), sub)
	if err != nil {
		h.tb.Fatalf("batch %s: %v", sub.BatchID(), err)
	}
	return res
}

// resultsOnSubject counts the messages on a run's results subject.
func (h *harness) resultsOnSubject(runID string) int {
	h.tb.Helper()
	_, js := h.srv.Conn(h.tb)
	ctx := ctxFor(h.tb, 10*time.Second)
	s, err := js.Stream(ctx, h.cfg.Names().Of(runID).ResultsStream())
	if err != nil {
		h.tb.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(h.cfg.Names().ResultsSubject(runID)))
	if err != nil {
		h.tb.Fatal(err)
	}
	return int(info.State.Subjects[h.cfg.Names().ResultsSubject(runID)])
}

// submitUntilParked submits sub and waits for the resume ticket of its call callID.
func (h *harness) submitUntilParked(ctx context.Context, sub contracts.BatchSubmission, callID string) contracts.ResumeTicket {
	h.tb.Helper()
	return stacktest.Park(h.tb, ctx, h.client, sub, callID)
}

// wantResults awaits the results of step 1 of run and fails the test unless their texts,
// joined with "|", are want.
func (h *harness) wantResults(ctx context.Context, run, want string) {
	h.tb.Helper()
	out, err := h.client.Await(ctx, run, 1)
	if err != nil {
		h.tb.Fatal(err)
	}
	if got := strings.Join(texts(out), "|"); got != want {
		h.tb.Errorf("results %q, want %q", got, want)
	}
}

// callKey is the key of call callID of batch (run, step): its batch's pin names the
// target that leads the key. Before the batch is recorded it is the key of no record
// (target none), so a wait that reads it simply reads nothing yet.
func (h *harness) callKey(run string, step int64, callID string) string {
	h.tb.Helper()
	b, err := h.stack.Env.FreshBatch(ctxFor(h.tb, 10*time.Second), run, step)
	if errors.Is(err, pipeline.ErrBatchNotFound) {
		return contracts.CallKey("", run, step, callID)
	}
	if err != nil {
		h.tb.Fatalf("batch %s: %v", contracts.BatchID(run, step), err)
	}
	for i, c := range b.Submission.Calls {
		if c.CallID == callID {
			return contracts.CallKeyOf(&b, i)
		}
	}
	h.tb.Fatalf("batch %s has no call %q", contracts.BatchID(run, step), callID)
	return ""
}

// ledger is how many times the body of operation (run, step, call) ran.
func (h *harness) ledger(run string, step int64, callID string) int {
	h.tb.Helper()
	return h.stack.Ledger(run, step, callID)
}

func texts(res *client.BatchResult) []string {
	out := make([]string, len(res.Results))
	for i, r := range res.Results {
		out[i] = r.Output.Text()
	}
	return out
}
