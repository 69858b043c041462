package execcore_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/pipeline"
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
	checkOneOutput(t, e, c, contracts.OutcomeIndeterminate)
	if n := e.Ledger(c); n != 1 {
		t.Errorf("body ran %d times, want 1: a mismatched pin must not replay", n)
	}
}
