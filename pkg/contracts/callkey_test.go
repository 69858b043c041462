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
		run    string
		step   int64
		callID string
	}{{"run-1", 0, "call_1"}, {"r", 42, "toolu_01.x/y z"}, {"run_x-9", 7, "é"}} {
		run, step, callID, err := ParseCallKey(CallKey(c.run, c.step, c.callID))
		if err != nil || run != c.run || step != c.step || callID != c.callID {
			t.Errorf("ParseCallKey(CallKey(%q, %d, %q)) = %q, %d, %q, %v", c.run, c.step, c.callID, run, step, callID, err)
		}
	}
	for _, key := range []string{"", "run", "run.1", "run.x.c", "run.-1.c", "run.1.c.d", "ru n.1.c", "run.1.=%%"} {
		if _, _, _, err := ParseCallKey(key); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseCallKey(%q): err = %v, want ErrInvalidID", key, err)
		}
	}
}
