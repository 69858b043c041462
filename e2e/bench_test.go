package e2e_test

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// BenchmarkPipeline_latency measures submit-to-last-result latency of one batch at a time,
// for 1-call and 10-call echo batches, and reports the median and p99.
func BenchmarkPipeline_latency(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			h := newHarness(b)
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var calls []contracts.ToolCall
				for j := range n {
					calls = append(calls, call(fmt.Sprintf("c%d", j), "echo", map[string]any{"text": "x"}))
				}
				start := time.Now()
				h.mustRun(batch(fmt.Sprintf("lat-%d-%d", n, i), 1, []string{"echo"}, calls...))
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkPipeline_throughput runs 64 runs submitting 10-call echo batches concurrently
// and reports calls per second.
func BenchmarkPipeline_throughput(b *testing.B) {
	h := newHarness(b)
	const runs, perBatch = 64, 10
	var next atomic.Int64
	var calls atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for r := range runs {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				var cs []contracts.ToolCall
				for j := range perBatch {
					cs = append(cs, call(fmt.Sprintf("c%d", j), "echo", map[string]any{"text": "x"}))
				}
				h.mustRun(batch(fmt.Sprintf("tp-%d", r), i, []string{"echo"}, cs...))
				calls.Add(perBatch)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(calls.Load())/time.Since(start).Seconds(), "calls/s")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
}

func benchSizes() []int {
	if s := os.Getenv("AWAKEN_BENCH_SIZES"); s != "" {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err == nil && n > 0 {
				out = append(out, n)
			}
		}
		return out
	}
	return []int{1, 10}
}

// BenchmarkLedger_budgetBatches runs six 512-call parallel batches of delegate, one tool a
// global budget matches (cost 0, so the budget never blocks), with long run and call ids,
// and reports each batch's submit-to-last-result time (each started once the previous one's
// work is all done) and the sixth's ratio to the first.
// The budget's ledger entry is one key every decision of the tool rewrites by
// compare-and-swap: what each decision costs must not grow with the calls that came
// before, so the sixth batch takes about as long as the first. Run it alone, once:
//
//	go test -run '^$' -bench BenchmarkLedger_budgetBatches -benchtime 1x ./e2e/
func BenchmarkLedger_budgetBatches(b *testing.B) {
	const batches, calls = 6, 512
	cfg := exampleConfig(b)
	cfg.Executors.BodyLedger = false
	zero := 0.0
	for i := range cfg.Tools {
		if cfg.Tools[i].ID == "delegate" {
			cfg.Tools[i].Cost = &zero
		}
	}
	cfg.Policy.Limits = []contracts.LimitConfig{{Name: "spend", Tools: []string{"delegate"}, Key: contracts.LimitKeyGlobal,
		Budget: &contracts.BudgetLimitConfig{Amount: 1e9}}}
	h := newHarness(b, withConfig(cfg))
	// Long ids, as agent frameworks make them (a uuid-sized run id, a 64-character call id).
	long := strings.Repeat("0123456789abcdef", 4)
	for i := 0; i < b.N; i++ {
		var took []time.Duration
		for n := range batches {
			var cs []contracts.ToolCall
			for j := range calls {
				cs = append(cs, call(fmt.Sprintf("call_%s_%04d", long, j), "delegate", map[string]any{"task": "x"}))
			}
			sub := batch(fmt.Sprintf("ledger-bench-%s-%d-%d", long[:36], i, n), 1, []string{"delegate"}, cs...)
			start := time.Now()
			if _, err := h.client.SubmitAndWait(ctxFor(b, 10*time.Minute), sub); err != nil {
				b.Fatalf("batch %d: %v", n+1, err)
			}
			took = append(took, time.Since(start))
			b.Logf("batch %d of %d calls: %v", n+1, calls, took[n].Round(time.Millisecond))
			// What the batch leaves to do after its results (archive, limit releases) is
			// done before the next starts, so each batch is timed on a quiet pipeline.
			b.StopTimer()
			h.waitQuiet(sub.RunID, sub.Step)
			b.StartTimer()
		}
		for n, d := range took {
			b.ReportMetric(d.Seconds(), fmt.Sprintf("batch%d-s", n+1))
		}
		b.ReportMetric(took[batches-1].Seconds()/took[0].Seconds(), "sixth/first")
	}
}
