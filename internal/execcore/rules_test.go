package execcore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// toolOfMode names the tool of testConfig whose capability supports each recovery mode.
var toolOfMode = map[contracts.ToolRecoveryMode]string{
	contracts.ModeNeverReplay:    "tool",
	contracts.ModeReplaySafe:     "replayable",
	contracts.ModeIdempotent:     "idempotent",
	contracts.ModeDurableRequest: "durable",
}

// TestReplayRechecksPinnedPolicyAgainstCurrentCapability: a call found entered after a
// crash is replayed only if its pinned policy is still supported by the tool's current
// capability. "tool" is non_recoverable now, so its replay_safe pin (taken when the tool
// was replay_safe) makes the call Indeterminate instead of running the body again.
func TestReplayRechecksPinnedPolicyAgainstCurrentCapability(t *testing.T) {
	e := exectest.New(t, testConfig)
	var hits exectest.Counter
	e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, &hits))
	start(t, e, &scripted{body: text("ok")})
	c := call("call_1", "tool", replaySafe)
	e.Allow(c)

	rec := e.WaitTerminal(c)
	if rec.Phase.Kind != contracts.PhaseIndeterminate || !strings.HasPrefix(rec.Phase.Reason, execcore.ReasonCapabilityPrefix) ||
		!strings.Contains(rec.Phase.Reason, string(contracts.CapabilityNonRecoverable)) {
		t.Fatalf("phase %s reason %q, want indeterminate: %s… non_recoverable", rec.Phase.Kind, rec.Phase.Reason, execcore.ReasonCapabilityPrefix)
	}
	if got := exectest.Stages(rec); !slices.Equal(got, []string{"entered", "indeterminate"}) {
		t.Errorf("timeline %v, want entered, indeterminate", got)
	}
	checkEnded(t, e, c, contracts.OutcomeIndeterminate, 1) // a mismatched pin must not replay
}

// TestRunCancelStopsTheBodiesInFlight: the gate's notice that a run was cancelled (sent on
// the stop subject once it sealed the run's batch; the test sends it as the gate does)
// reaches the executor, which cancels the context of the run's call in flight: a body that would run for 30 seconds
// ends as soon as it sees its context cancelled, and the call ends Indeterminate
// ("cancelled") — the outcome the gate's seal gives it — instead of running to its end.
// A call of another run keeps running.
func TestRunCancelStopsTheBodiesInFlight(t *testing.T) {
	e := exectest.New(t, testConfig)
	type ended struct {
		run string
		err error
		at  time.Time
	}
	started := make(chan string, 2)
	ends := make(chan ended, 2)
	long := func(ctx context.Context, inv execcore.Invocation) (contracts.ToolOutput, error) {
		started <- inv.RunID
		select {
		case <-ctx.Done():
			ends <- ended{inv.RunID, ctx.Err(), time.Now()}
			return contracts.ToolOutput{}, ctx.Err()
		case <-time.After(30 * time.Second):
			ends <- ended{inv.RunID, nil, time.Now()}
			return contracts.TextOutput("", "ran to its end"), nil
		}
	}
	start(t, e, &scripted{body: long}, execcore.WithDelivery(bus.WithWorkers(2)))
	victim := call("call_1", "long", neverReplay)
	other := exectest.Call{RunID: "run-other", Step: 1, CallID: "call_1", ToolID: "long", Policy: neverReplay}
	e.Allow(victim)
	e.Allow(other)
	for range 2 {
		select {
		case <-started:
		case <-time.After(exectest.Wait):
			t.Fatal("the bodies never started")
		}
	}

	ev, err := cloudevent.NewEvent("cancel-1", "test/gate", contracts.TypeRunCancel, contracts.RunCancel{RunID: victim.RunID})
	if err != nil {
		t.Fatal(err)
	}
	cancelledAt := time.Now()
	if err := e.Conn.PublishMsg(cloudevent.EncodeMsg(e.Names.CallStopSubject(), ev)); err != nil {
		t.Fatal(err)
	}
	var got ended
	select {
	case got = <-ends:
	case <-time.After(exectest.Wait):
		t.Fatal("the cancelled run's body did not end")
	}
	// Never a tight timing: only "well before its 30 seconds" is asserted.
	if got.run != victim.RunID || !errors.Is(got.err, context.Canceled) || got.at.Sub(cancelledAt) > 10*time.Second {
		t.Fatalf("first body to end: %+v %s after the cancel, want %s cancelled well before 30 s", got, got.at.Sub(cancelledAt), victim.RunID)
	}
	rec := e.WaitTerminal(victim)
	if rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Phase.Reason != execcore.ReasonRunCancelled {
		t.Errorf("cancelled call %s %q, want indeterminate %q", rec.Phase.Kind, rec.Phase.Reason, execcore.ReasonRunCancelled)
	}
	checkOneOutput(t, e, victim, contracts.OutcomeIndeterminate)
	if r := e.Record(other); r.Phase.Kind != contracts.PhaseExecuting {
		t.Errorf("the other run's call is %s, want still executing", r.Phase.Kind)
	}
	// Stop the other one too, so the test does not wait for its body.
	ev, err = cloudevent.NewEvent("cancel-2", "test/gate", contracts.TypeRunCancel, contracts.RunCancel{RunID: other.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Conn.PublishMsg(cloudevent.EncodeMsg(e.Names.CallStopSubject(), ev)); err != nil {
		t.Fatal(err)
	}
	e.WaitTerminal(other)
}
