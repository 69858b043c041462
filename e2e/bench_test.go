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
