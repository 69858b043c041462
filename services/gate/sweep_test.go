package gate

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestRunSweepRemovesTheExpiredRunsLedgerKeysOnly: when a run record expires, the run
// sweep purges the run's keys of every limit keyed by run — every window of a windowed
// one — and nothing else: not the keys of a run whose record exists again under the same
// id, not another run's, not a tenant's that happens to carry the run's id as its value.
// A batch sweep purges the batch's step-keyed keys the same way and leaves its other
// steps' keys.
func TestRunSweepRemovesTheExpiredRunsLedgerKeysOnly(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil,
		contracts.LimitConfig{Name: "per-run", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Count: intp(5)},
		contracts.LimitConfig{Name: "run-rate", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Rate: &contracts.RateLimitConfig{N: 5, Window: "1h"}},
		contracts.LimitConfig{Name: "per-step", Tools: []string{"echo"}, Key: contracts.LimitKeyStep, Count: intp(5)},
		contracts.LimitConfig{Name: "per-tenant", Tools: []string{"echo"}, Key: contracts.LimitKeyTenant, Count: intp(5)})
	kv, err := h.JS.KeyValue(h.Ctx, h.Env.Names.LimitsBucket())
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Unix(3600, 0)
	keys := map[string]bool{ // key → whether a sweep below removes it
		contracts.LimitLedgerKey("per-run", "gone", time.Time{}):          true,
		contracts.LimitLedgerKey("run-rate", "gone", hour):                true,
		contracts.LimitLedgerKey("run-rate", "gone", hour.Add(time.Hour)): true,
		contracts.LimitLedgerKey("per-step", "gone/1", time.Time{}):       true,
		contracts.LimitLedgerKey("per-step", "gone/2", time.Time{}):       false,
		contracts.LimitLedgerKey("per-run", "back", time.Time{}):          false,
		contracts.LimitLedgerKey("per-run", "gone-too", time.Time{}):      false,
		contracts.LimitLedgerKey("per-tenant", "gone", time.Time{}):       false,
	}
	for key := range keys {
		b, _ := json.Marshal(contracts.LimitLedgerEntry{Used: 1})
		if _, err := kv.Put(h.Ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	// Run "back" has a record again (its id reused after its first record expired).
	if _, err := h.Env.Runs.Create(h.Ctx, contracts.RunKey("back"), contracts.RunRecord{RunID: "back"}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"gone", "back"} {
		d := bus.Delivery{Subject: contracts.RecordSubject(h.Env.Names.RunsBucket(), contracts.RunKey(run))}
		if err := h.Env.Handle(ServiceName, h.Svc.handleRunExpired)(h.Ctx, d); err != nil {
			t.Fatalf("sweep of run %s: %v", run, err)
		}
	}
	archive := bus.Delivery{Subject: contracts.RecordSubject(h.Env.Names.BatchesBucket(), contracts.BatchKey("gone", 1))}
	if err := h.Env.Handle(ServiceName, h.Svc.handleBatchExpired)(h.Ctx, archive); err != nil {
		t.Fatalf("sweep of batch gone:1: %v", err)
	}
	st, err := h.JS.Stream(h.Ctx, contracts.RecordStream(h.Env.Names.LimitsBucket()))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(h.Ctx, jetstream.WithSubjectFilter(contracts.RecordSubject(h.Env.Names.LimitsBucket(), ">")))
	if err != nil {
		t.Fatal(err)
	}
	for key, swept := range keys {
		if left := info.State.Subjects[contracts.RecordSubject(h.Env.Names.LimitsBucket(), key)]; (left == 0) != swept {
			t.Errorf("key %s: %d messages left, want swept %v", key, left, swept)
		}
	}
}
