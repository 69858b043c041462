package limits

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// BenchmarkLedger_budgetBatches is the limits ledger alone, on a real server: six batches of
// 512 echo calls with long run and call ids, each decided by the limiter as the gate's
// probe decides a parallel batch (one after the other, each reserving its share of one
// global budget by compare-and-swap), then ended as the gate-limits consumer ends calls
// that ran. It reports each batch's decision time and the sixth's ratio to the first:
// what a decision reads and rewrites must not grow with the calls decided before, so the
// ratio stays near 1. Run it once:
//
//	go test -run '^$' -bench BenchmarkLedger_budgetBatches -benchtime 1x ./services/gate/limits/
func BenchmarkLedger_budgetBatches(b *testing.B) {
	const batches, calls = 6, 512
	cfg := servicetest.ParseConfig(b, "prefix: awaken\ntools:\n  - id: echo\n    capability: replay_safe\n    recovery_policy: { mode: replay_safe, max_attempts: 3 }\n    cost: 0\n")
	cfg.Policy.Limits = []contracts.LimitConfig{{Name: "spend", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal,
		Budget: &contracts.BudgetLimitConfig{Amount: 1e9}}}
	ctx := servicetest.Context(b, 30*time.Minute)
	_, env := servicetest.NewEnv(b, ctx, cfg, bus.TopologyConfig{}, zerolog.Nop())
	host, err := contracts.CompilePolicy(cfg.Policy)
	if err != nil {
		b.Fatal(err)
	}
	l := New(DepsOf(env), host)
	long := strings.Repeat("0123456789abcdef", 4)
	allow := &contracts.GateOutcome{Kind: contracts.GateAllow}
	for n := 0; n < b.N; n++ {
		took := make([]time.Duration, batches)
		for k := range batches {
			sub := contracts.BatchSubmission{RunID: fmt.Sprintf("run-%s-%d-%d", long[:36], n, k), ThreadID: "thread", Step: 1,
				Agent: contracts.AgentSnapshot{SnapshotID: "snap", Tools: []string{"echo"}}}
			for j := range calls {
				sub.Calls = append(sub.Calls, contracts.ToolCall{CallID: fmt.Sprintf("call_%s_%04d", long, j), ToolID: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
			}
			rec := &contracts.BatchRecord{Submission: sub, Hash: sub.Hash(), CreatedAt: env.Now()}
			start := time.Now()
			for i := range calls {
				if _, err := l.Apply(ctx, rec, i, allow); err != nil {
					b.Fatal(err)
				}
			}
			took[k] = time.Since(start)
			for i := range calls {
				if err := endRanCall(ctx, l, rec, i, allow); err != nil {
					b.Fatal(err)
				}
			}
			e, _, err := l.ledger.Get(ctx, contracts.LimitLedgerKey("spend", "", time.Time{}))
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("batch %d of %d calls: decided in %v; the entry holds %d operations", k+1, calls, took[k].Round(time.Millisecond), len(e.Held))
		}
		for k, d := range took {
			b.ReportMetric(d.Seconds(), fmt.Sprintf("batch%d-s", k+1))
		}
		b.ReportMetric(took[batches-1].Seconds()/took[0].Seconds(), "sixth/first")
	}
}

// endRanCall ends call i of rec, which ran without reporting a cost, as the gate-limits
// consumer does with its terminal record.
func endRanCall(ctx context.Context, l *Ledger, rec *contracts.BatchRecord, i int, decided *contracts.GateOutcome) error {
	_, err := l.EndShares(ctx, rec, i, callOp(rec, i), decided, nil)
	return err
}
