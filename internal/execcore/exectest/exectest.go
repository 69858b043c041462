// Package exectest drives executors in tests the way the gate would: it runs a real
// embedded JetStream server with the awaken topology, writes call records into the calls
// bucket, publishes executor requests, and reads back records, the body-run ledger and the
// announced CallOutputs. It is for tests only.
package exectest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Wait is the deadline of every wait in these helpers: generous, because the tests run
// under the race detector on a small shared machine.
const Wait = 20 * time.Second

// Env is a pipeline environment on its own embedded server, with a switchable fault hook.
type Env struct {
	*pipeline.Env
	T      testing.TB
	Ctx    context.Context
	Server *natstest.Server
	// Counters is the counters bucket (the body-run ledger, the counter tool's counters).
	Counters jetstream.KeyValue

	mu    sync.Mutex
	fault pipeline.FaultHook
}

// New starts a server, ensures the topology (memory storage), parses cfgYAML and binds an
// environment whose Faults call the hook set with [Env.SetFault] ([servicetest.NewEnv]), and
// on which a hand-off mismatch fails the test.
// Logs go to the test log when -v is set, and are discarded otherwise.
func New(t testing.TB, cfgYAML string) *Env {
	t.Helper()
	cfg := servicetest.ParseConfig(t, cfgYAML)
	cfg.Executors.BodyLedger = true // Ledger reads it
	// Executors started under Ctx stop at the test's cleanup, after t.Context() ends.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	}
	srv, penv := servicetest.NewEnv(t, ctx, cfg, bus.TopologyConfig{}, log)
	counters, err := penv.OpenCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Env: penv, T: t, Ctx: ctx, Server: srv, Counters: counters}
	// A commit whose stored revisions hand work to others than it names fails the test, as
	// it does in the services' tests (servicetest.New) and the stack's (stacktest).
	penv.OnHandOffMismatch = func(m pipeline.HandOffMismatch) { t.Errorf("hand-off mismatch: %v", m) }
	penv.Faults = func(ctx context.Context, service string, p pipeline.FaultPoint, op string) error {
		e.mu.Lock()
		f := e.fault
		e.mu.Unlock()
		if f == nil {
			return nil
		}
		return f(ctx, service, p, op)
	}
	return e
}

// SetFault installs the fault hook (nil removes it).
func (e *Env) SetFault(f pipeline.FaultHook) {
	e.mu.Lock()
	e.fault = f
	e.mu.Unlock()
}

// FastRetries are the options of an executor under test that retries quickly: a failed
// delivery comes back after 20ms and a local retry of an unavailable tool waits 5 to
// 20ms, where production waits seconds; the delivery limit stays the default. Options
// given after them override them.
func FastRetries() []execcore.Option {
	return []execcore.Option{
		execcore.WithDelivery(bus.WithDelivery(0, 20*time.Millisecond)),
		execcore.WithRetryBackoff(5*time.Millisecond, 20*time.Millisecond),
	}
}

// ErrInjected is the error returned by faults built with [FailTimes].
var ErrInjected = errors.New("injected fault")

// FailTimes returns a fault hook that fails at point (for any service and operation) the
// first n times it is reached, and counts every time it is reached in *hits.
func FailTimes(point pipeline.FaultPoint, n int, hits *Counter) pipeline.FaultHook {
	var mu sync.Mutex
	left := n
	return func(_ context.Context, _ string, p pipeline.FaultPoint, _ string) error {
		if p != point {
			return nil
		}
		if hits != nil {
			hits.Add(1)
		}
		mu.Lock()
		defer mu.Unlock()
		if left != 0 {
			left--
			return fmt.Errorf("%w at %s", ErrInjected, p)
		}
		return nil
	}
}

// Counter is a concurrency-safe counter for tests.
type Counter struct {
	mu sync.Mutex
	n  int
}

// Add adds d.
func (c *Counter) Add(d int) {
	c.mu.Lock()
	c.n += d
	c.mu.Unlock()
}

// Load returns the value.
func (c *Counter) Load() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Call names one call of a test batch.
type Call struct {
	RunID  string
	Step   int64
	Index  int
	CallID string
	ToolID string
	Args   string
	Policy contracts.ToolRecoveryPolicy
	Target contracts.ToolExecutionTarget
}

// Key is the call record key.
func (c Call) Key() string { return contracts.CallKey(c.target(), c.RunID, c.Step, c.CallID) }

// target is c's executor target (brain unless set).
func (c Call) target() contracts.ToolExecutionTarget {
	if c.Target == "" {
		return contracts.TargetBrain
	}
	return c.Target
}

// Op is the operation id.
func (c Call) Op() string { return contracts.OperationID(c.RunID, c.Step, c.CallID) }

func (c Call) policy() contracts.ToolRecoveryPolicy {
	if c.Policy.Mode == "" {
		return contracts.DefaultRecoveryPolicy()
	}
	return c.Policy
}

// Record returns the record the gate writes when it allows c: Executing{1}, not entered,
// carrying the arguments that run — the executor request.
func (c Call) Record() contracts.CallRecord {
	args := c.Args
	if args == "" {
		args = "{}"
	}
	return contracts.CallRecord{
		Index: c.Index, CallID: c.CallID, ToolID: c.ToolID,
		Phase: contracts.ExecutingPhase(1), Policy: c.policy(),
		Decision: &contracts.GateOutcome{Kind: contracts.GateAllow},
		Input:    json.RawMessage(args),
	}
}

// Request returns c's executor request for attempt.
func (c Call) Request(attempt uint16) contracts.ExecRequest {
	args := c.Args
	if args == "" {
		args = "{}"
	}
	return contracts.ExecRequest{
		RunID: c.RunID, Step: c.Step, Index: c.Index, CallID: c.CallID, ToolID: c.ToolID,
		Arguments: json.RawMessage(args), Target: c.target(), Policy: c.policy(), Attempt: attempt,
	}
}

// Seed writes rec as c's call record (Create).
func (e *Env) Seed(c Call, rec contracts.CallRecord) {
	e.T.Helper()
	if _, err := e.Calls.Create(e.Ctx, c.Key(), rec); err != nil {
		e.T.Fatalf("exectest: seed %s: %v", c.Key(), err)
	}
}

// Allow does what the gate does on Allow: writes Executing{1} — that revision, announced
// with ce-id {op}:exec:1, is the executor request. It returns its stream sequence (the
// revision).
func (e *Env) Allow(c Call) uint64 {
	e.T.Helper()
	rev, err := e.Calls.Create(e.Ctx, c.Key(), c.Record())
	if err != nil {
		e.T.Fatalf("exectest: allow %s: %v", c.Key(), err)
	}
	return rev
}

// Publish writes c's record again, as it is stored (Executing{1} when there is none yet),
// as an executor request with ce-id msgID, and returns its stream sequence: a second,
// distinct request message for the same call, as a forged or repeated hand-off would be.
func (e *Env) Publish(c Call, msgID string) uint64 {
	e.T.Helper()
	rec, _, err := e.Calls.Get(e.Ctx, c.Key())
	if errors.Is(err, state.ErrNotFound) {
		rec, err = c.Record(), nil
	}
	if err != nil {
		e.T.Fatalf("exectest: read %s: %v", c.Key(), err)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		e.T.Fatal(err)
	}
	ev := cloudevent.Event{ID: msgID, Source: "awaken/gate", Type: contracts.TypeExecRequest, Data: data}
	m := cloudevent.EncodeMsg(e.Names.CallRecordSubject(c.Key()), ev)
	m.Header.Del(jetstream.MsgIDHeader) // as state.Store writes a record revision
	ack, err := e.JS.PublishMsg(e.Ctx, m)
	if err != nil {
		e.T.Fatalf("exectest: publish: %v", err)
	}
	return ack.Sequence
}

// Record reads c's call record.
func (e *Env) Record(c Call) contracts.CallRecord {
	e.T.Helper()
	rec, _, err := e.Calls.Get(e.Ctx, c.Key())
	if err != nil {
		e.T.Fatalf("exectest: read %s: %v", c.Key(), err)
	}
	return rec
}

// WaitTerminal waits until c's record is Completed or Indeterminate and returns it.
func (e *Env) WaitTerminal(c Call) contracts.CallRecord {
	e.T.Helper()
	return e.waitRecord(c, "to become terminal", func(r contracts.CallRecord) bool { return r.Phase.IsTerminal() })
}

// WaitEntered waits until c's record is entered and returns it.
func (e *Env) WaitEntered(c Call) contracts.CallRecord {
	e.T.Helper()
	return e.waitRecord(c, "to be entered", func(r contracts.CallRecord) bool { return r.Entered })
}

// waitRecord waits until c's record exists and done holds for it, and returns it; a record
// that cannot be read fails the test at once.
func (e *Env) waitRecord(c Call, what string, done func(contracts.CallRecord) bool) contracts.CallRecord {
	e.T.Helper()
	var rec contracts.CallRecord
	natstest.WaitFor(e.T, Wait, func() bool {
		r, _, err := e.Calls.Get(e.Ctx, c.Key())
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			e.T.Fatalf("exectest: read %s: %v", c.Key(), err)
		}
		rec = r
		return err == nil && done(r)
	}, "call "+c.Op()+" "+what)
	return rec
}

// Ledger returns how many times c's body started.
func (e *Env) Ledger(c Call) uint64 {
	e.T.Helper()
	n, err := execcore.ReadCounter(e.Ctx, e.Counters, execcore.LedgerKey(c.RunID, c.Step, c.CallID))
	if err != nil {
		e.T.Fatalf("exectest: ledger: %v", err)
	}
	return n
}

// Output is one announced CallOutput with its message id.
type Output struct {
	ID      string
	Source  string
	Payload contracts.CallOutput
}

// Outputs returns every CallOutput of run, in order: the terminal call-record revisions
// (ce-type CallOutput) the bucket's stream still holds ([servicetest.CallOutputs]).
func (e *Env) Outputs(runID string) []Output {
	e.T.Helper()
	var out []Output
	for _, m := range servicetest.CallOutputs(e.T, e.Ctx, e.JS, e.Names, runID) {
		out = append(out, Output{ID: m.Event.ID, Source: m.Event.Source, Payload: servicetest.Decode[contracts.CallOutput](e.T, m.Event)})
	}
	return out
}

// WaitOutputs waits until run has at least n CallOutput messages and returns them all.
func (e *Env) WaitOutputs(runID string, n int) []Output {
	e.T.Helper()
	var out []Output
	natstest.WaitFor(e.T, Wait, func() bool {
		out = e.Outputs(runID)
		return len(out) >= n
	}, fmt.Sprintf("%d call outputs of run %s", n, runID))
	return out
}

// WaitSettled waits until the durable consumer has delivered every message up to stream
// sequence seq and none is awaiting an acknowledgement: everything it was given is done.
func (e *Env) WaitSettled(durable string, seq uint64) jetstream.ConsumerInfo {
	e.T.Helper()
	var info *jetstream.ConsumerInfo
	natstest.WaitFor(e.T, Wait, func() bool {
		c, err := e.JS.Consumer(e.Ctx, e.Names.CallRecordsStream(), durable)
		if err != nil {
			return false
		}
		info, err = c.Info(e.Ctx)
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	}, fmt.Sprintf("consumer %s to settle through sequence %d", durable, seq))
	return *info
}

// Text returns the text of a Completed record's output, and whether it is an error.
func Text(t testing.TB, rec contracts.CallRecord) (string, bool) {
	t.Helper()
	if rec.Phase.Kind != contracts.PhaseCompleted || rec.Phase.Output == nil {
		t.Fatalf("exectest: record is %s (reason %q), want Completed", rec.Phase.Kind, rec.Phase.Reason)
	}
	return rec.Phase.Output.Text(), rec.Phase.Output.IsError
}

// Stages lists the timeline stages of rec.
func Stages(rec contracts.CallRecord) []string {
	out := make([]string, len(rec.Timeline))
	for i, m := range rec.Timeline {
		out[i] = m.Stage
	}
	return out
}
