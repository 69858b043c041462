package api_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/wiring/cli"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestBatchShowCommand runs `awaken batch show` against the approved scenario.
func TestBatchShowCommand(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-batch-show"
	tk := h.park(run, map[string]string{})
	if r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", ""); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	h.results(run)
	batchID := contracts.BatchID(run, 1)
	view := h.batch(batchID)
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), []string{"batch", "show", batchID, "--json=false", "--nats-url", h.srv.URL()}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := stdout.String()
	for _, want := range []string{batchID, "completed: before approval", "completed: ran ask_me", api.AnonymousActor, "completed: 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	marks := 0
	for _, c := range view.Calls {
		marks += len(c.Timeline)
		for _, m := range c.Timeline {
			if !strings.Contains(got, m.At.UTC().Format("2006-01-02T15:04:05.000Z")) {
				t.Errorf("output lacks the %s mark of %s", m.Stage, c.CallID)
			}
		}
	}
	if marks < 6 {
		t.Fatalf("only %d timeline marks for three executed calls:\n%s", marks, got)
	}
	stdout.Reset()
	if code := cli.Main(context.Background(), []string{"batch", "show", "nonsense", "--nats-url", h.srv.URL()}, &stdout, &stderr); code != 2 {
		t.Fatalf("malformed batch id: exit %d, want 2", code)
	}
}
