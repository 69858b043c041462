package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate"
)

// crashCell is one cell of the crash matrix: the service that crashes, where, and on which
// call's operation (empty: the first operation that reaches the point).
type crashCell struct {
	service string
	point   pipeline.FaultPoint
	callID  string
	// nth is which hit of the point (on that operation) crashes (default the first).
	nth int
	// indeterminate is the call id expected to end Indeterminate (a never_replay body that
	// was entered when the process died), or "".
	indeterminate string
	// next submits the run's next step while the crashed service hangs, and waits until
	// it is recorded before the kill: the publisher's finalize released the run, so the
	// next batch replaces the finalized one in the run record (archiving it first) and
	// the restarted publisher must find it in the archive.
	next bool
	// limits runs the cell with a host count limit on every tool, per run, high enough
	// to block nothing: the ledger must end holding each run's calls that ran once; and a
	// concurrency of 1 per run on delegate, so the parallel batch's two calls take turns:
	// its slot entry must end with nothing held, queued or remembered.
	limits bool
}

// outage is how long the cell's stack stays dead after the kill: the run retention, so
// what the cell's batches archived before the crash expires meanwhile (a finalized batch
// the publisher has not published yet must not). A crash of the gate between committing
// the approval of a0 and publishing it (its second hit after commit) is finished only by
// the resume command's redelivery, which the control stream keeps retention.runs: that
// stack is started again at once, as docs/operations.md ("Data lifecycle") asks every
// outage to be shorter than the retention — a longer one leaves the call approved and
// never handed over.
func (c crashCell) outage() time.Duration {
	if c.service == "gate" && c.callID == "a0" && c.nth == 2 && c.point == pipeline.FaultAfterCommit {
		return 0
	}
	return crashRunRetention
}

func (c crashCell) name() string {
	n := c.service + "/" + string(c.point)
	if c.callID != "" {
		n += "/" + c.callID
	}
	if c.nth > 1 {
		n += fmt.Sprintf("/hit%d", c.nth)
	}
	if c.next {
		n += "/next-step"
	}
	if c.limits && c.point != gate.FaultAfterLimitReserve {
		n += "/limits"
	}
	return n
}

// crashMatrix is every fault point of every service. The batch is sequential: echo
// (replay_safe), counter (never_replay), forbidden (denied by policy), then a second
// parallel-delegation batch so the gate's probe path and the executor's parallel requests
// are crashed too, and a batch of calls that declare parallel (three lookups), gated all
// first and then handed over together.
//
// The batcher has one point: after the write that records the batch, which is also the
// gate's work (nothing is published after it). The gate's first hit is call c0, gated from
// that run-record revision; c1 is gated from c0's terminal revision (the gate's
// sequential dispatch), a commit point of its own.
func crashMatrix(withSandbox bool) []crashCell {
	cells := []crashCell{{service: "batcher", point: pipeline.FaultAfterCommit}}
	for _, svc := range []string{"gate", "brain-exec", "publisher"} {
		for _, p := range []pipeline.FaultPoint{pipeline.FaultAfterCommit, pipeline.FaultAfterPublish} {
			cells = append(cells, crashCell{service: svc, point: p})
		}
	}
	cells = append(cells,
		// The gate on call c1, asked for by c0's output: decided and handed to the
		// executor, then dead before or after its audit copy and tool_call fact.
		crashCell{service: "gate", point: pipeline.FaultAfterCommit, callID: "c1"},
		crashCell{service: "gate", point: pipeline.FaultAfterPublish, callID: "c1"},
		// Entered replay_safe body: the restarted executor replays it.
		crashCell{service: "brain-exec", point: pipeline.FaultInTool, callID: "c0"},
		// Entered never_replay body: recovery seals it Indeterminate, never runs it again.
		crashCell{service: "brain-exec", point: pipeline.FaultInTool, callID: "c1", indeterminate: "c1"},
		// The counter's own commit and publish.
		crashCell{service: "brain-exec", point: pipeline.FaultAfterCommit, callID: "c1"},
		crashCell{service: "gate", point: pipeline.FaultAfterCommit, callID: "c2"},
		// The parallel batch: the gate's probe and a delegated call in flight.
		crashCell{service: "gate", point: pipeline.FaultAfterCommit, callID: "probe"},
		crashCell{service: "gate", point: pipeline.FaultAfterPublish, callID: "probe"},
		crashCell{service: "brain-exec", point: pipeline.FaultInTool, callID: "d1"},
		// The declared-parallel batch (three lookups): the gate dead between two
		// decisions (l1's recorded, l2's not made), after the first hand-over (l0's
		// executor request stored, l1 and l2 not handed over) and after the last
		// hand-over's copies; an executor after a lookup's own commit; the publisher on
		// the batch.
		crashCell{service: "gate", point: gate.FaultAfterParallelDecision, callID: "l1"},
		crashCell{service: "gate", point: pipeline.FaultAfterCommit, callID: "l0"},
		crashCell{service: "gate", point: pipeline.FaultAfterPublish, callID: "l2"},
		crashCell{service: "brain-exec", point: pipeline.FaultAfterCommit, callID: "l1"},
		crashCell{service: "publisher", point: pipeline.FaultAfterCommit, callID: "4"},
		crashCell{service: "publisher", point: pipeline.FaultAfterPublish, callID: "4"},
		// The approval batch: the gate parks ask_me (first hit), then applies the test's
		// approval (second hit).
		crashCell{service: "gate", point: pipeline.FaultAfterCommit, callID: "a0"},
		crashCell{service: "gate", point: pipeline.FaultAfterCommit, callID: "a0", nth: 2},
		crashCell{service: "gate", point: pipeline.FaultAfterPublish, callID: "a0", nth: 2},
		// The publisher on each batch (its operation is the batch id, which ends in the
		// step): finalized and not published, or published as one results message and
		// not marked — the parallel batch (outputs in any order, several workers) and the
		// approval batch (published after a human's answer).
		crashCell{service: "publisher", point: pipeline.FaultAfterCommit, callID: "2"},
		crashCell{service: "publisher", point: pipeline.FaultAfterPublish, callID: "2"},
		crashCell{service: "publisher", point: pipeline.FaultAfterCommit, callID: "3"},
		crashCell{service: "publisher", point: pipeline.FaultAfterPublish, callID: "3"},
		// The sequential batch (step 1) finalized and its run released, the publisher dead
		// before its results (after-commit) or before the archive (after-publish), while
		// the platform's next step of the run is accepted and replaces it in the run
		// record.
		crashCell{service: "publisher", point: pipeline.FaultAfterCommit, callID: "1", next: true},
		crashCell{service: "publisher", point: pipeline.FaultAfterPublish, callID: "1", next: true},
		// Host limits: the gate dead after a limit's ledger write and before the decision
		// that counts on it, on the sequential path, the probe and the ask; and the
		// gate's ordinary commit point with limits in force.
		crashCell{service: "gate", point: gate.FaultAfterLimitReserve, callID: "c0", limits: true},
		crashCell{service: "gate", point: gate.FaultAfterLimitReserve, callID: "d1", limits: true},
		crashCell{service: "gate", point: gate.FaultAfterLimitReserve, callID: "a0", limits: true},
		crashCell{service: "gate", point: gate.FaultAfterLimitReserve, callID: "l2", limits: true},
		crashCell{service: "gate", point: pipeline.FaultAfterCommit, callID: "c1", limits: true},
		// A concurrency slot passed on in the ledger (d0's or d1's, whichever ran first,
		// to the other) and the gate dead before it handed the waiter's call over.
		crashCell{service: "gate", point: gate.FaultAfterSlotHandOff, limits: true},
	)
	if withSandbox {
		for _, p := range []pipeline.FaultPoint{pipeline.FaultAfterCommit, pipeline.FaultAfterPublish, pipeline.FaultInTool} {
			cells = append(cells, crashCell{service: "sandbox-exec", point: p, callID: "c3"})
		}
	}
	return cells
}

// TestCrashMatrix crashes every service at every fault point for real: the hook stops the
// handler where it is, the test kills the whole stack hard (connections closed, the message
// stays unacked), keeps it dead for longer than the run retention, starts a new stack on
// the same server, waits until every batch is published, and runs the checker over the
// streams and the ledger.
//
// The run retention is five seconds ([crashRunRetention]), so records expire during every
// cell and while its stack is dead: the archives of the batches published before the
// crash, and the markers that have the gate sweep their call records; the run records
// of finished runs; the control, tickets and events streams' messages. The checker reads
// the streams as the cell goes on (checker.Follow). The matrix ends with one line of
// expiry evidence for all its cells, and fails if none expired (when every cell ran: a
// single cell may end before anything of it expires).
func TestCrashMatrix(t *testing.T) {
	wasm := filepath.Join(repoRoot(t), "bin", "wasm", "wc.wasm")
	_, err := os.Stat(wasm)
	withSandbox := err == nil
	if !withSandbox {
		t.Logf("no %s (run `make wasm`): the sandbox-exec cells are skipped", wasm)
	}
	cells := crashMatrix(withSandbox)
	evidence := crashEvidence{all: len(cells)}
	t.Cleanup(func() { evidence.report(t) })
	// Each cell spends its outage (the run retention) with its stack dead and nothing to
	// compute, so the cells run in parallel, more at once than GOMAXPROCS: TestMain sets
	// this package's -parallel (parallelCellsPerProc).
	for _, cell := range cells {
		t.Run(cell.name(), func(t *testing.T) {
			t.Parallel()
			runCrashCell(t, cell, withSandbox, &evidence)
		})
	}
}

// crashRetention is the run retention of the crash matrix: the records of a finished
// batch expire five seconds after its publication, its run record ten. Events expire as
// fast; submissions outlive a cell (one that expired unread would be a batch lost by the
// documented contract, not by a bug); results outlive it too, since the publisher's
// recovery from a crash between its results and its archive looks for them there.
var crashRetention = config.Retention{Runs: crashRunRetention.String(), Events: crashRunRetention.String(), Submissions: "5m", Results: "1h"}

// The stack's restart on a loaded machine (several seconds under -race) must fit in it, as
// must the tail's lag.
const crashRunRetention = 5 * time.Second

// crashEvidence sums, over the cells, what expired and the dead letters left.
type crashEvidence struct {
	mu    sync.Mutex
	names contracts.Names
	exp   checker.Expiry
	cells int
	dead  int
	all   int // cells in the matrix
}

func (e *crashEvidence) add(names contracts.Names, exp checker.Expiry, dead int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names, e.exp, e.cells, e.dead = names, e.exp.Add(exp), e.cells+1, e.dead+dead
}

// report prints the matrix's expiry and dead-letter lines (`make chaos` shows them) and
// fails the matrix when nothing expired: it would prove nothing of expiry.
func (e *crashEvidence) report(t *testing.T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cells == 0 {
		return
	}
	line := fmt.Sprintf("crash matrix: cells=%d %s dead_letters=%d", e.cells, e.exp.Summary(e.names), e.dead)
	t.Log(line)
	fmt.Println(line)
	if e.cells == e.all && (e.exp.ArchivesExpired == 0 || e.exp.RunRecordsExpired == 0) {
		t.Errorf("no batch archive or no run record expired in any cell")
	}
}

// crashPartitions is the partition count of every cell.
const crashPartitions = 2

func runCrashCell(t *testing.T, cell crashCell, withSandbox bool, evidence *crashEvidence) {
	cfg := exampleConfig(t)
	cfg.Consumers.AckWait = contracts.Duration(time.Second)
	cfg.Retention = crashRetention
	// Two partitions: a cell's runs, its consumers and its sweeps span both.
	cfg.Storage.Partitions = crashPartitions
	if cell.outage() == 0 {
		// The cell whose restart must come before the resume command it redelivers
		// expires (the control stream keeps it retention.runs): with several cells
		// starting stacks at once, a restart has been seen to take longer than five
		// seconds (the call then stays approved and never handed over, the documented
		// outage limit, not what this cell checks).
		cfg.Retention.Runs = "1m"
	}
	if cell.limits {
		// These cells read each run's keys in the limits ledger at the end; the keys of a
		// limit keyed by run go when the run record expires, which the short retention
		// would have happen before the check.
		cfg.Retention.Runs = "1h"
	}
	if cell.limits {
		cfg.Policy.Limits = []contracts.LimitConfig{
			{Name: crashLimit, Tools: []string{"*"}, Key: contracts.LimitKeyRun, Count: ptrTo(100)},
			{Name: crashSlots, Tools: []string{"delegate"}, Key: contracts.LimitKeyRun, Concurrency: ptrTo(1)},
		}
	}
	h := newHarness(t, withConfig(cfg))
	run := "crash-" + strings.NewReplacer("/", "-", "_", "-").Replace(cell.name())

	crashed := make(chan struct{})
	released := make(chan struct{})
	var hitsMu sync.Mutex
	hits := 0
	nth := max(cell.nth, 1)
	h.setFaults(func(ctx context.Context, service string, point pipeline.FaultPoint, op string) error {
		if service != cell.service || point != cell.point {
			return nil
		}
		if cell.callID != "" && !strings.HasSuffix(op, ":"+cell.callID) {
			return nil
		}
		hitsMu.Lock()
		hits++
		fired := hits == nth
		hitsMu.Unlock()
		if !fired {
			return nil
		}
		// The process "dies" here: nothing after this point of the handler runs until the
		// stack is killed, and then the handler only fails.
		close(crashed)
		select {
		case <-released:
		case <-ctx.Done():
		}
		return fmt.Errorf("injected crash: %s at %s on %s", service, point, op)
	})

	tools := []string{"echo", "counter", "forbidden", "delegate", "wc", "ask_me", "lookup"}
	seq := batch(run, 1, tools,
		call("c0", "echo", map[string]any{"text": "before"}),
		call("c1", "counter", map[string]any{"name": run}),
		call("c2", "forbidden", map[string]any{}),
	)
	if withSandbox {
		seq.Calls = append(seq.Calls, call("c3", "wc", map[string]any{"text": "a b c"}))
	}
	// One active batch per run: the four batches run concurrently on four runs.
	par := batch(run+"-par", 2, tools,
		call("d0", "delegate", map[string]any{"task": "x", "ms": 10}),
		call("d1", "delegate", map[string]any{"task": "y", "ms": 10}),
	)
	ask := batch(run+"-ask", 3, tools, call("a0", "ask_me", map[string]any{}))
	declared := batch(run+"-lp", 4, tools,
		call("l0", "lookup", map[string]any{"ms": 10}),
		call("l1", "lookup", map[string]any{"ms": 10}),
		call("l2", "lookup", map[string]any{"ms": 10}),
	)
	all := []contracts.BatchSubmission{seq, par, ask, declared}
	var hist checker.History
	ctx := ctxFor(t, 90*time.Second)
	_, js := h.srv.Conn(t)
	tail := checker.Follow(ctx, js, cfg.Names())
	defer tail.Stop()
	for _, sub := range all {
		hist.Batches = append(hist.Batches, checker.Batch{Submission: sub, SubmittedAt: time.Now(),
			Expect: map[string]checker.Expectation{"c2": checker.ExpectDenied, "a0": checker.ExpectApproval}})
		if _, err := h.client.Submit(ctx, sub); err != nil {
			t.Fatal(err)
		}
	}
	// The approver answers the ask_me ticket whenever it is open, whichever stack runs:
	// an answer lost to the crash is repeated until the call leaves Awaiting.
	approved := make(chan error, 1)
	go func() { approved <- approveUntilPublished(ctx, h, ask) }()
	select {
	case <-crashed:
	case <-ctx.Done():
		t.Fatalf("the fault point %s was never reached", cell.name())
	}
	if cell.next {
		next := batch(run, 2, tools, call("n0", "echo", map[string]any{"text": "next"}))
		hist.Batches = append(hist.Batches, checker.Batch{Submission: next, SubmittedAt: time.Now()})
		if _, err := h.client.Submit(ctx, next); err != nil {
			t.Fatal(err)
		}
		natstest.WaitFor(t, 30*time.Second, func() bool {
			r, _, err := h.stack.Env.Runs.Get(ctx, contracts.RunKey(run))
			return err == nil && r.Holds(2) != nil
		}, "the next step recorded in the run record")
		all = append(all, next)
	}
	hist.Kills = append(hist.Kills, checker.Kill{Target: "stack", At: time.Now()})
	h.stack.Kill()
	close(released)
	// The outage's length is the fault itself, so it is waited out.
	if err := ctxsleep.Sleep(ctx, cell.outage()); err != nil {
		t.Fatal(err)
	}
	h.start()

	for _, sub := range all {
		if _, err := h.client.Await(ctx, sub.RunID, sub.Step); err != nil {
			t.Fatalf("batch %s after the crash: %v", sub.BatchID(), err)
		}
	}
	if err := <-approved; err != nil {
		t.Fatal(err)
	}
	obs, err := tail.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep := checker.Check(hist, obs, checker.RulesFor(cfg))
	t.Log(rep.Summary())
	exp, err := tail.Expiries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(exp.Summary(cfg.Names()))
	n := cfg.Names()
	dead := servicetest.ReadStored(t, ctx, js, n.DeadLetterStream(), n.DeadLetterSubject("*"), false)
	for _, m := range dead {
		t.Errorf("dead letter: consumer %s, code %s, delivered %s on %s: %s",
			m.Header.Get(bus.HeaderConsumer), m.Header.Get(bus.HeaderDeadCode), m.Header.Get(bus.HeaderDelivered),
			m.Header.Get(bus.HeaderOriginalSubject), m.Header.Get(bus.HeaderDeadReason))
	}
	evidence.add(n, exp, len(dead))
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	if rep.Lost != 0 || rep.Duplicates != 0 {
		t.Errorf("lost %d, duplicates %d", rep.Lost, rep.Duplicates)
	}
	res, err := h.client.Await(ctx, seq.RunID, seq.Step)
	if err != nil {
		t.Fatal(err)
	}
	// A kill aimed at another batch (the three run concurrently) can also catch a call of
	// this batch inside its executor: that call is then an explained Indeterminate (the
	// checker verified the reason and the kill), not a failure of the cell.
	// So can a kill of the gate after it handed a call of this batch on (the executor
	// request is durable at its commit point, and the stack dies as one process): the
	// executor may have entered the call, never_replay counter included, before the kill.
	aimedHere := strings.HasPrefix(cell.callID, "c") && cell.service != "gate"
	collateral := func(r contracts.ToolResultEvent) bool {
		return !aimedHere && r.Outcome == contracts.OutcomeIndeterminate &&
			strings.Contains(r.Output.Text(), execcore.ReasonOwnerLeaseExpired)
	}
	for _, r := range res.Results {
		wantIndeterminate := r.CallID == cell.indeterminate
		if got := r.Outcome == contracts.OutcomeIndeterminate; got != wantIndeterminate && !collateral(r) {
			t.Errorf("call %s: outcome %s %q, want indeterminate=%v", r.CallID, r.Outcome, r.Output.Text(), wantIndeterminate)
		}
	}
	if cell.indeterminate != "" {
		if got := res.Results[1].Output.Text(); !strings.Contains(got, execcore.ReasonOwnerLeaseExpired) {
			t.Errorf("indeterminate reason %q", got)
		}
	} else if got := res.Results[1].Output.Text(); got != "1" && !collateral(res.Results[1]) {
		t.Errorf("counter result %q, want 1 (ran exactly once)", got)
	}
	if got := res.Results[2].Output.Text(); !strings.HasPrefix(got, "blocked:") {
		t.Errorf("forbidden call result %q, want blocked", got)
	}
	// Never twice; not at all only when the kill caught the counter entered but before its
	// body started (a collateral Indeterminate, above).
	if n := h.ledger(run, 1, "c1"); n > 1 || n == 0 && !collateral(res.Results[1]) {
		t.Errorf("counter body ran %d times, want 1", n)
	}
	if cell.limits {
		// Every call of each run that was allowed took one share, once, whatever the
		// crash: the sequential batch's echo, counter (and wc), the two delegations, the
		// approved ask, the three lookups; the denied call took none.
		want := map[string]float64{seq.RunID: 2, par.RunID: 2, ask.RunID: 1, declared.RunID: 3}
		if withSandbox {
			want[seq.RunID] = 3
		}
		kv, err := js.KeyValue(ctx, cfg.Names().LimitsBucket())
		if err != nil {
			t.Fatal(err)
		}
		for runID, n := range want {
			e, err := kv.Get(ctx, contracts.LimitLedgerKey(crashLimit, runID, time.Time{}))
			if err != nil {
				t.Fatalf("ledger of %s: %v", runID, err)
			}
			var entry contracts.LimitLedgerEntry
			err = contracts.DecodeRecordStrict(e.Value(), &entry)
			if err != nil {
				t.Fatal(err)
			}
			// Used counts each call once; a call that ran may have left held for used
			// already (folded by a later write of the key), so held is at most the calls.
			if entry.Used != n || len(entry.Held) > int(n) {
				t.Errorf("run %s: ledger %+v, want %v calls counted once", runID, entry, n)
			}
		}
		e, err := kv.Get(ctx, contracts.LimitLedgerKey(crashSlots, par.RunID, time.Time{}))
		if err != nil {
			t.Fatalf("slots of %s: %v", par.RunID, err)
		}
		var entry contracts.LimitLedgerEntry
		err = contracts.DecodeRecordStrict(e.Value(), &entry)
		if err != nil {
			t.Fatal(err)
		}
		if entry.Used != 0 || len(entry.Held) != 0 || len(entry.Waiting) != 0 || len(entry.Handed) != 0 {
			t.Errorf("run %s: slots %+v, want every slot given back", par.RunID, entry)
		}
	}
}

// crashLimit and crashSlots are the host limits of the crash cells with limits.
const (
	crashLimit = "crash-count"
	crashSlots = "crash-slots"
)

func ptrTo[T any](v T) *T { return &v }

// approveUntilPublished approves the ask_me call of batch sub until its results are
// published: each attempt waits for the open ticket and answers it; an attempt whose answer
// is lost in a crash (or refused because the call was already resumed) is simply retried.
func approveUntilPublished(ctx context.Context, h *harness, sub contracts.BatchSubmission) error {
	for {
		done, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := h.client.Await(done, sub.RunID, sub.Step); err == nil {
			cancel()
			return nil
		}
		cancel()
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		t, err := h.client.WaitTicket(attempt, sub.RunID, sub.Step, sub.Calls[0].CallID)
		if err == nil {
			_, _ = h.client.Approve(attempt, t, "crash matrix")
		}
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("approving %s: %w", sub.BatchID(), ctx.Err())
		}
	}
}

// cancelCell is one cell of the cancel matrix: how the gate's handling of a run's
// cancellation is held or crashed between recording the run's end and sealing its batch.
type cancelCell struct {
	name string
	// hook is the gate's fault hook at [gate.FaultAfterRunEnd] for the cancelled run; it
	// returns an error to crash the handler there.
	hook func(ctx context.Context, h *harness, c2Key string) error
}

// cancelMatrix holds or crashes the gate right after it recorded a run's end and before
// its seal, while call c1 of a two-call sequential batch is in its body: the window in
// which an executor that stopped c1 on the cancellation could commit c1 terminal before
// the seal, and the gate's sequential dispatch could hand c2 over from that revision.
func cancelMatrix() []cancelCell {
	return []cancelCell{
		{
			// Held until c2 has a record (the gate gated or sealed it from c1's output) or,
			// when nothing touches c2, for cancelHold: the time an executor acting on the
			// cancellation before the seal would need to end c1 and have c2 handed over.
			name: "gate held after the run's end",
			hook: func(ctx context.Context, h *harness, c2Key string) error {
				deadline := time.Now().Add(cancelHold)
				for time.Now().Before(deadline) && ctx.Err() == nil {
					if _, _, err := h.stack.Env.Calls.Get(ctx, c2Key); err == nil {
						return nil
					}
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
				return nil
			},
		},
		{
			// Dead after the end: the cancellation is redelivered and seals then.
			name: "gate dead after the run's end",
			hook: func(context.Context, *harness, string) error {
				return errors.New("injected crash after the run's end")
			},
		},
	}
}

// cancelHold bounds how long the held cell keeps the gate's seal back.
const cancelHold = 3 * time.Second

// TestCancelMatrix cancels a run while c1, the first of two sequential calls, is in its
// body, with the gate's handling of the cancellation held or crashed between recording the
// run's end and sealing the batch. Whatever the interleaving, the cancelled run runs no
// next call: c2 is never decided, handed over or run, and both calls end Indeterminate
// "cancelled".
func TestCancelMatrix(t *testing.T) {
	for _, cell := range cancelMatrix() {
		t.Run(cell.name, func(t *testing.T) {
			cfg := exampleConfig(t)
			cfg.Consumers.AckWait = contracts.Duration(time.Second)
			h := newHarness(t, withConfig(cfg))
			run := "cancel-" + strings.NewReplacer(" ", "-", "'", "").Replace(cell.name)
			ctx := ctxFor(t, 90*time.Second)
			sub := batch(run, 1, []string{"slow", "counter"},
				call("c1", "slow", map[string]any{"ms": 30000}),
				call("c2", "counter", map[string]any{"name": run}))
			if _, err := h.client.Submit(ctx, sub); err != nil {
				t.Fatal(err)
			}
			natstest.WaitFor(t, 30*time.Second, func() bool {
				rec, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, "c1"))
				return err == nil && rec.Entered
			}, "c1's body to be entered")
			c2Key := h.callKey(run, 1, "c2")
			var once sync.Once
			h.setFaults(func(fctx context.Context, service string, point pipeline.FaultPoint, op string) error {
				if service != gate.ServiceName || point != gate.FaultAfterRunEnd || op != run {
					return nil
				}
				var err error
				once.Do(func() { err = cell.hook(fctx, h, c2Key) })
				return err
			})
			if err := h.client.Cancel(ctx, run, "stop"); err != nil {
				t.Fatal(err)
			}
			res, err := h.client.Await(ctx, run, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Results {
				if r.Outcome != contracts.OutcomeIndeterminate || r.Output.Text() != contracts.IndeterminatePrefix+execcore.ReasonRunCancelled {
					t.Errorf("%s: %s %q, want indeterminate %q", r.CallID, r.Outcome, r.Output.Text(), execcore.ReasonRunCancelled)
				}
			}
			// The gate's seal writes every call of the batch outside its sequence; an
			// executor's stop writes the call in it. Bodies are stopped only on the gate's
			// notice, after its seal: c1 must end by the seal.
			c1, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, "c1"))
			if err != nil {
				t.Fatal(err)
			}
			if !c1.Parallel {
				t.Errorf("c1 was ended by an executor's stop before the gate sealed the cancelled run's batch: %s %q", c1.Phase.Kind, c1.Phase.Reason)
			}
			c2, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, "c2"))
			if err != nil {
				t.Fatal(err)
			}
			if c2.Decision != nil || c2.Input != nil || c2.Entered {
				t.Errorf("c2 of the cancelled run was decided %+v, handed over with input %s, entered %v: want sealed without a decision", c2.Decision, c2.Input, c2.Entered)
			}
			if n := h.ledger(run, 1, "c2"); n != 0 {
				t.Errorf("c2's body ran %d times after its run was cancelled", n)
			}
		})
	}
}
