package tickets

import (
	"errors"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestParseCorrelation(t *testing.T) {
	for _, r := range []contracts.TicketReason{contracts.ReasonPermission, contracts.ReasonScheduledAction, contracts.ReasonClientExecution} {
		corr := contracts.CorrelationID(r, "run-7", 3, "call_1")
		p, err := ParseCorrelation(corr)
		if err != nil || p.reason != r || p.runID != "run-7" || p.step != 3 || p.callID != "call_1" {
			t.Errorf("parse %q = %+v, %v", corr, p, err)
		}
	}
	for _, bad := range []string{"", "perm.run.3", "perm.run.x.call", "perm.run.-1.call", "other.run.3.call",
		"perm.run.03.call", "perm..3.call", "perm.run.3.call.extra"} {
		if _, err := ParseCorrelation(bad); !errors.Is(err, ErrBadCorrelation) {
			t.Errorf("parse %q: %v, want ErrBadCorrelation", bad, err)
		}
	}
}

func TestCeilSecond(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, row := range []struct {
		in, want time.Time
	}{
		{base, base},
		{base.Add(time.Nanosecond), base.Add(time.Second)},
		{base.Add(999 * time.Millisecond), base.Add(time.Second)},
	} {
		if got := CeilSecond(row.in); !got.Equal(row.want) {
			t.Errorf("CeilSecond(%s) = %s, want %s", row.in, got, row.want)
		}
	}
}
