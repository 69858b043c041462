package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// measureRow runs the workloads against one row's target.
func measureRow(row string, s settings) (res result) {
	res.Row = row
	defer func() {
		if r := recover(); r != nil {
			res.Error = fmt.Sprint("panic: ", r)
		}
	}()
	spec, err := parseRow(row)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Level, res.Desc = spec.level, describe(spec)
	if spec.partitions > 0 {
		res.Desc += fmt.Sprintf("; %d partition(s) (storage.partitions, or the floor's), the throughput phase with %d runs a partition (at least -runs, as many in each)",
			spec.partitions, runsPerPartition)
	}
	if spec.cluster {
		res.Nodes = clusterNodes
		// The large parallel batches are left to the single-server rows: on the
		// cluster they would take longer than the rest of the row.
		s.Large = ""
	}
	runs := throughputRunIDs(s.Runs, 0)
	if spec.partitions > 0 {
		// A scaling row measures latency and throughput only (the write counts, the large
		// and the I/O-bound batches are the pipeline row's), with enough runs to fill
		// every partition, spread evenly over them.
		res.Partitions = spec.partitions
		runs = throughputRunIDs(max(s.Runs, runsPerPartition*spec.partitions), spec.partitions)
	}
	res.Runs = len(runs)
	ctx := context.Background()
	var t target
	switch spec.kind {
	case rowPipeline:
		t, err = newPipeline(ctx, s, spec.level, spec.cluster, 1, 0, spec.partitions)
	case rowOps:
		var o *ops
		if o, err = newOps(ctx, spec.level, spec.cluster); err == nil {
			defer o.close()
			err = measureOps(ctx, o, s, &res)
		}
		if err != nil {
			res.Error = err.Error()
		}
		return res
	case rowScaleOut:
		res.Executors = spec.executors
		var p *pipeline
		if p, err = newPipeline(ctx, s, spec.level, false, spec.executors, scaleOutWorkers, 0); err == nil {
			defer p.close()
			if err := measureScaleOut(ctx, p, s, runs, &res); err != nil {
				res.Error = err.Error()
			}
		}
		if err != nil {
			res.Error = err.Error()
		}
		return res
	case rowFloor:
		t, err = newFloor(ctx, spec.level, spec.cluster, spec.partitions)
	case rowTemporal, rowTemporalLocal:
		res.Tuning = temporalTuning(spec.level, spec.kind == rowTemporalLocal)
		t, err = newTemporal(ctx, false, spec.level, spec.kind == rowTemporalLocal)
	case rowTemporalMem:
		t, err = newTemporal(ctx, true, spec.level, false)
	case rowInProcess:
		t, err = newInProcess()
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer t.close()
	if s.CPUPerCall {
		if err := measureCPU(ctx, t, s, &res); err != nil {
			res.Error = err.Error()
		}
		return res
	}
	if s.WritesOnly {
		if sr, ok := t.(serverRow); ok {
			if err := measureWrites(ctx, t, sr, &res); err != nil {
				res.Error = err.Error()
			}
		}
		return res
	}
	profiled := spec.kind // -cpuprofile and -memprofile: the single-server pipeline rows
	if spec.cluster {
		profiled = spec.name
	}
	if err := measure(ctx, t, s, runs, &res, profiled); err != nil {
		res.Error = err.Error()
		return res
	}
	res.PeakRSSLoadMiB = peakRSSMiB()
	if spec.partitions > 0 {
		return res
	}
	if sr, ok := t.(serverRow); ok {
		if err := measureWrites(ctx, t, sr, &res); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	if p, ok := t.(*pipeline); ok {
		if err := measureLarge(ctx, p, s, &res); err != nil {
			res.Error = err.Error()
			return res
		}
		if err := measureIOBound(ctx, p, s, &res); err != nil {
			res.Error = err.Error()
		}
	}
	return res
}

// ioBound10 is the size of the I/O-bound batches of [measureIOBound].
const ioBound10 = 10

// measureIOBound times 10-call batches of I/O-bound calls (slowToolMS each), one batch at
// a time: of slow, run one call after another, and of lookup, which declares parallel
// and runs its calls at once.
func measureIOBound(ctx context.Context, p *pipeline, s settings, res *result) error {
	for _, m := range []struct{ mode, tool, want string }{
		{"sequential", "slow", "done"},
		{"parallel", "lookup", fmt.Sprintf("looked up in %d ms", slowToolMS)},
	} {
		var lat []time.Duration
		for i := range max(s.LargeIters, 1) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			start := time.Now()
			out, err := p.runTool(cctx, m.tool, "io-"+m.mode, int64(i+1), ioBound10)
			d := time.Since(start)
			cancel()
			if err != nil {
				return fmt.Errorf("%s %d-call %s batch: %w", m.mode, ioBound10, m.tool, err)
			}
			if len(out) != ioBound10 || out[0] != m.want || out[ioBound10-1] != m.want {
				return fmt.Errorf("%s %d-call %s batch: outputs %q, want %q", m.mode, ioBound10, m.tool, out, m.want)
			}
			lat = append(lat, d)
		}
		st := percentiles(lat)
		res.IOBound = append(res.IOBound, ioBatch{Mode: m.mode, Tool: m.tool, Calls: ioBound10, Iterations: st.N, MedianMs: st.MedianMs})
	}
	return nil
}

func describe(r rowSpec) string {
	sync := "JetStream sync always (fsync before every acknowledgement: `awaken dev --sync always`)"
	sqlite := "SQLite PRAGMA synchronous=FULL"
	if r.level == levelRelaxed {
		sync = "JetStream default lazy sync (fsync every 2 min: `awaken dev --sync lazy`)"
		sqlite = "SQLite PRAGMA synchronous=OFF"
	}
	if r.cluster {
		switch r.kind {
		case rowPipeline:
			return fmt.Sprintf("the five services (app.Start) on %d embedded file-storage JetStream servers clustered over the loopback in this process (each with its own store directory), every stream and bucket R%d (storage.replicas), %s on every node; the services and the public client (SubmitAndWait) connect over TCP to the three client URLs; no soft memory limit (the peak RSS holds three servers); no large batches",
				clusterNodes, clusterNodes, sync)
		case rowFloor:
			return fmt.Sprintf("the floor relay on the same kind of %d-node cluster, its streams and buckets R%d, %s on every node, its connections over TCP to the three client URLs (see floor_hops)", clusterNodes, clusterNodes, sync)
		case rowOps:
			return fmt.Sprintf("as ops, on the same kind of %d-node cluster, stream and bucket R%d, %s on every node, the client connected over TCP to the three client URLs", clusterNodes, clusterNodes, sync)
		}
	}
	switch r.kind {
	case rowOps:
		return fmt.Sprintf("single JetStream operations one at a time on one embedded server (%d-byte messages, file storage, R1), %s: a publish with a message id, a KV get, a KV compare-and-swap update, atomic batch publishes of %v messages", opsPayload, sync, opsBatchSizes)
	case rowPipeline:
		return "the five services (app.Start) on an embedded file-storage JetStream server, " + sync + ", public client SubmitAndWait; the soft memory limit of `awaken dev` (app.DevMemoryLimit, 160 MiB, unless GOMEMLIMIT is set)"
	case rowFloor:
		return "a logic-free relay doing the pipeline's sequential JetStream operations on its streams and buckets (named FLOOR_ for AWAKEN_) on the same kind of server, " + sync + " (see floor_hops)"
	case rowTemporal:
		return "Temporal v1.30.4 lite server (temporaltest's server, SQLite in a FILE, " + sqlite + "), tuned (see tuning); the workflow runs the calls as activities in order"
	case rowTemporalLocal:
		return "as temporal, but the workflow runs the calls as LOCAL activities in order (weaker: a call re-runs after a worker crash)"
	case rowTemporalMem:
		return "Temporal v1.30.4 temporaltest.NewServer as shipped (SQLite IN MEMORY, not durable, untuned), same workflow"
	case rowInProcess:
		return "the echo tool invoked through the brain-exec registry as direct function calls, no durability"
	case rowScaleOut:
		return fmt.Sprintf("the pipeline (%s) with %d brain-exec instance(s) of %d workers each on one server; throughput of %d runs × %d-call batches of the slow tool (%d ms of I/O per call)",
			sync, r.executors, scaleOutWorkers, throughputRuns, throughputCalls, slowToolMS)
	}
	return ""
}

// measureWrites counts, on the row's own server, the stored messages and API requests one
// call costs on the sequential path (1- and 10-call batches) and, for the pipeline, on the
// parallel paths (10-call delegate batches, and 10-call lookup batches, which declare
// parallel).
func measureWrites(ctx context.Context, t target, sr serverRow, res *result) error {
	type path struct {
		name       string
		batches, n int
		run        func(ctx context.Context, runID string, step int64, n int) ([]string, error)
	}
	paths := []path{{"sequential 1-call", 20, 1, t.run}, {"sequential 10-call", 5, 10, t.run}}
	if p, ok := t.(*pipeline); ok {
		paths = append(paths, path{"parallel 10-call", 5, 10, func(ctx context.Context, runID string, step int64, n int) ([]string, error) {
			return p.runTool(ctx, "delegate", runID, step, n)
		}}, path{"declared parallel 10-call", 5, 10, func(ctx context.Context, runID string, step int64, n int) ([]string, error) {
			return p.runTool(ctx, "lookup", runID, step, n)
		}})
	}
	for _, p := range paths {
		wc, err := countWrites(ctx, sr.servers(), p.name, p.batches, p.n, p.run)
		if err != nil {
			return err
		}
		res.Writes = append(res.Writes, wc)
	}
	return nil
}

// measureLarge times parallel delegate batches of the sizes in s.Large, one at a time.
func measureLarge(ctx context.Context, p *pipeline, s settings, res *result) error {
	for _, f := range strings.Split(s.Large, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-large %q: %w", s.Large, err)
		}
		var lat []time.Duration
		for i := range s.LargeIters {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			start := time.Now()
			out, err := p.runTool(cctx, "delegate", fmt.Sprintf("large%d", n), int64(i+1), n)
			d := time.Since(start)
			cancel()
			if err != nil {
				return fmt.Errorf("parallel batch of %d: %w", n, err)
			}
			if len(out) != n || out[n-1] != fmt.Sprintf("x%d", n-1) {
				return fmt.Errorf("parallel batch of %d: %d outputs, last %q", n, len(out), out[len(out)-1])
			}
			lat = append(lat, d)
		}
		st := percentiles(lat)
		res.Large = append(res.Large, largeBatch{Calls: n, Iterations: st.N, MedianMs: st.MedianMs,
			PerCallMs: st.MedianMs / float64(n), CallsPerSec: float64(n) / (st.MedianMs / 1e3)})
	}
	return nil
}

// measureScaleOut runs the throughput phase with the slow tool: s.Runs concurrent runs,
// each submitting 10-call sequential batches for s.Duration.
func measureScaleOut(ctx context.Context, p *pipeline, s settings, runs []string, res *result) error {
	p.tool = "slow"
	// One warm-up batch per executor's worth of calls.
	if _, err := p.run(ctx, "warm", 1, 1); err != nil {
		return err
	}
	calls, batches, err := throughput(ctx, s, runs, func(ctx context.Context, run string, step int64) error {
		out, err := p.run(ctx, run, step, s.BatchCalls)
		if err == nil && (len(out) != s.BatchCalls || out[0] != "done") {
			err = fmt.Errorf("slow batch %s/%d: outputs %q", run, step, out)
		}
		return err
	})
	res.CallsPerSec, res.Batches = calls, batches
	return err
}

// measure runs the latency series and the throughput phase with runs.
func measure(ctx context.Context, t target, s settings, runs []string, res *result, row string) error {
	want := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("x%d", i)
		}
		return out
	}
	one := func(run string, step int64, n int) (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		start := time.Now()
		got, err := t.run(cctx, run, step, n)
		d := time.Since(start)
		if err != nil {
			return d, fmt.Errorf("batch %s/%d: %w", run, step, err)
		}
		if !slices.Equal(got, want(n)) {
			return d, fmt.Errorf("batch %s/%d: outputs %q, want %q", run, step, got, want(n))
		}
		return d, nil
	}
	for _, series := range []struct {
		n     int
		iters int
		dst   *stats
	}{{1, s.Iters1, &res.Latency1}, {10, s.Iters10, &res.Latency10}} {
		run := fmt.Sprintf("lat%d", series.n)
		lat := make([]time.Duration, 0, series.iters)
		for i := range s.Warmup + series.iters {
			d, err := one(run, int64(i+1), series.n)
			if err != nil {
				return err
			}
			if i >= s.Warmup {
				lat = append(lat, d)
			}
		}
		*series.dst = percentiles(lat)
	}
	stopProfile, err := startProfiles(row, s)
	if err != nil {
		return err
	}
	var before jsCounters
	sr, counted := t.(serverRow)
	if counted {
		if before, err = readCounters(sr.servers()); err != nil {
			return err
		}
	}
	calls, batches, err := throughput(ctx, s, runs, func(ctx context.Context, run string, step int64) error {
		_, err := one(run, step, s.BatchCalls)
		return err
	})
	if serr := stopProfile(); serr != nil && err == nil {
		err = serr
	}
	res.CallsPerSec, res.Batches = calls, batches
	if err == nil && counted {
		var after jsCounters
		if after, err = readCounters(sr.servers()); err == nil {
			res.ThroughputStored = map[string]uint64{}
			for name, v := range after.stored {
				if d := v - before.stored[name]; d > 0 {
					res.ThroughputStored[name] = d
				}
			}
		}
	}
	return err
}

// throughputRunIDs are n run ids for the throughput phase; with parts > 1, n rounded up to
// a multiple of parts, as many in each partition (partitionOf), so that a partition's
// share of the load is its share of the runs, not the luck of the hash.
func throughputRunIDs(n, parts int) []string {
	if parts <= 1 {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("tp%d", i)
		}
		return ids
	}
	per := (n + parts - 1) / parts
	left := make([]int, parts)
	for i := range left {
		left[i] = per
	}
	ids := make([]string, 0, per*parts)
	for i := 0; len(ids) < per*parts; i++ {
		id := fmt.Sprintf("tp%d", i)
		if p := partitionOf(id, parts); left[p] > 0 {
			left[p]--
			ids = append(ids, id)
		}
	}
	return ids
}

// throughput runs one run per id in runs concurrently, each submitting batches of
// s.BatchCalls calls one after the other through batch until s.Duration has passed, and
// returns the calls per second and the batches completed.
func throughput(ctx context.Context, s settings, runs []string, batch func(ctx context.Context, run string, step int64) error) (float64, int64, error) {
	return throughputFrom(ctx, s, 1, runs, batch)
}

// throughputFrom is throughput with each run's steps starting at first.
func throughputFrom(ctx context.Context, s settings, first int64, runs []string, batch func(ctx context.Context, run string, step int64) error) (float64, int64, error) {
	var calls, batches atomic.Int64
	var firstErr error
	var errOnce sync.Once
	deadline := time.Now().Add(s.Duration)
	start := time.Now()
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			for step := first; time.Now().Before(deadline); step++ {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				err := batch(cctx, run, step)
				cancel()
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				calls.Add(int64(s.BatchCalls))
				batches.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return float64(calls.Load()) / elapsed.Seconds(), batches.Load(), nil
}

func percentiles(lat []time.Duration) stats {
	if len(lat) == 0 {
		return stats{}
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		i := min(len(lat)-1, int(q*float64(len(lat))))
		return float64(lat[i].Nanoseconds()) / 1e6
	}
	return stats{N: len(lat), MedianMs: at(0.50), P99Ms: at(0.99)}
}

// peakRSSMiB is this process's peak resident set so far: the figure the parent reads
// for the whole row when the child exits (getrusage's ru_maxrss), 0 where there is none.
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // Linux reports KiB
}
