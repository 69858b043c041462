package contracts

import (
	"errors"
	"testing"
)

// TestParseCallKeyInvertsCallKey: the publisher and the batcher read a call output's run,
// step and call from its record's key, so every key CallKey makes must parse back, and
// anything else must be refused.
func TestParseCallKeyInvertsCallKey(t *testing.T) {
	for _, c := range []struct {
		target ToolExecutionTarget
		run    string
		step   int64
		callID string
	}{{TargetBrain, "run-1", 0, "call_1"}, {TargetSandbox, "r", 42, "toolu_01.x/y z"}, {"", "run_x-9", 7, "é"}} {
		key := CallKey(c.target, c.run, c.step, c.callID)
		target, run, step, callID, err := ParseCallKey(key)
		if err != nil || target != c.target || run != c.run || step != c.step || callID != c.callID {
			t.Errorf("ParseCallKey(%q) = %q, %q, %d, %q, %v", key, target, run, step, callID, err)
		}
	}
	if k := CallKey("", "r", 1, "c"); k != "none.r.1.c" {
		t.Errorf("key of a call without a target = %q, want none.r.1.c", k)
	}
	for _, key := range []string{"", "run", "brain.run", "brain.run.1", "brain.run.x.c", "brain.run.-1.c",
		"brain.run.1.c.d", "brain.ru n.1.c", "brain.run.1.=%%", ".run.1.c"} {
		if _, _, _, _, err := ParseCallKey(key); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseCallKey(%q): err = %v, want ErrInvalidID", key, err)
		}
	}
}
