// Command awaken-bench measures the awaken pipeline side by side with the floor of its
// JetStream hops, with Temporal, and with plain function calls, in one run on this machine.
//
// The parent process runs every row in a child process of its own (the same binary with
// -row), so each row's peak RSS is its own: the parent reads the child's maximum resident
// set size from its rusage when it exits. The child measures and prints one JSON result
// line. The parent prints the table and writes bench/results/{timestamp}.json and
// bench/results/latest.json.
//
// Every durable row uses file storage: the pipeline and the floor on an embedded NATS
// server started with the same options (internal/natsserver.StartEmbedded), Temporal on SQLite in
// a file (see temporal.go for the in-memory temporaltest variant, reported separately).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Row names, in table order.
const (
	rowPipeline     = "pipeline"
	rowFloor        = "floor"
	rowTemporal     = "temporal"
	rowTemporalMem  = "temporal-mem"
	rowInProcess    = "in-process"
	throughputRuns  = 64
	throughputCalls = 10
)

// settings are the workload parameters shared by every row.
type settings struct {
	Iters1     int           `json:"latency_iterations_1_call"`
	Iters10    int           `json:"latency_iterations_10_calls"`
	Warmup     int           `json:"warmup_batches"`
	Duration   time.Duration `json:"-"`
	DurationS  float64       `json:"throughput_seconds"`
	Runs       int           `json:"throughput_runs"`
	BatchCalls int           `json:"throughput_batch_calls"`
	Config     string        `json:"config"`
	CPUProfile string        `json:"-"`
	MemProfile string        `json:"-"`
}

// stats are latency percentiles in milliseconds.
type stats struct {
	N        int     `json:"n"`
	MedianMs float64 `json:"median_ms"`
	P99Ms    float64 `json:"p99_ms"`
}

// result is what one row measured.
type result struct {
	Row         string  `json:"row"`
	Desc        string  `json:"description"`
	Latency1    stats   `json:"latency_1_call"`
	Latency10   stats   `json:"latency_10_calls"`
	CallsPerSec float64 `json:"throughput_calls_per_s"`
	Batches     int64   `json:"throughput_batches"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	Error       string  `json:"error,omitempty"`
}

// target runs one batch of n echo calls to completion and returns the ordered outputs.
type target interface {
	run(ctx context.Context, runID string, step int64, n int) ([]string, error)
	close()
}

func main() {
	var s settings
	row := flag.String("row", "", "run one row in this process and print its JSON result (internal)")
	rows := flag.String("rows", "pipeline,floor,temporal,temporal-mem,in-process", "rows to run")
	out := flag.String("out", "results", "directory for the JSON results")
	temporalBin := flag.String("temporal-bin", "", "binary built with -tags temporal that runs the Temporal rows (default: this one)")
	flag.IntVar(&s.Iters1, "iters1", 300, "latency iterations of the 1-call batch")
	flag.IntVar(&s.Iters10, "iters10", 100, "latency iterations of the 10-call batch")
	flag.IntVar(&s.Warmup, "warmup", 10, "warm-up batches before each latency series")
	flag.DurationVar(&s.Duration, "duration", 10*time.Second, "throughput phase length")
	flag.IntVar(&s.Runs, "runs", throughputRuns, "concurrent runs in the throughput phase")
	flag.StringVar(&s.Config, "config", "../examples/awaken.yaml", "awaken host configuration")
	flag.StringVar(&s.CPUProfile, "cpuprofile", "", "pipeline row: CPU profile of the throughput phase")
	flag.StringVar(&s.MemProfile, "memprofile", "", "pipeline row: allocation profile after the throughput phase")
	flag.Parse()
	s.DurationS = s.Duration.Seconds()
	s.BatchCalls = throughputCalls
	if *row != "" {
		res := measureRow(*row, s)
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if err := parent(strings.Split(*rows, ","), *out, *temporalBin, s); err != nil {
		fmt.Fprintln(os.Stderr, "awaken-bench:", err)
		os.Exit(1)
	}
}

// parent runs each row in a child process and reports.
func parent(rows []string, outDir, temporalBin string, s settings) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var results []result
	for _, r := range rows {
		r = strings.TrimSpace(r)
		fmt.Fprintf(os.Stderr, "== %s\n", r)
		args := []string{"-row", r, "-iters1", fmt.Sprint(s.Iters1), "-iters10", fmt.Sprint(s.Iters10),
			"-warmup", fmt.Sprint(s.Warmup), "-duration", s.Duration.String(), "-runs", fmt.Sprint(s.Runs),
			"-config", s.Config, "-cpuprofile", s.CPUProfile, "-memprofile", s.MemProfile}
		bin := self
		if temporalBin != "" && strings.HasPrefix(r, rowTemporal) {
			bin = temporalBin
		}
		cmd := exec.Command(bin, args...)
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		runErr := cmd.Run()
		var res result
		if err := json.Unmarshal(lastLine(stdout.Bytes()), &res); err != nil {
			res = result{Row: r, Error: fmt.Sprintf("child failed: %v; output %q", runErr, stdout.String())}
		}
		if cmd.ProcessState != nil {
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				res.PeakRSSMiB = float64(ru.Maxrss) / 1024 // Linux reports KiB
			}
		}
		results = append(results, res)
	}
	rep := report{
		Time: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(),
		CPUs: runtime.NumCPU(), Settings: s, Rows: results, Hops: hopsDoc,
	}
	rep.Ratios = ratios(results)
	printTable(os.Stdout, rep)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	name := filepath.Join(outDir, time.Now().UTC().Format("20060102T150405Z")+".json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(outDir, "latest.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "\nwritten: %s and %s\n", name, filepath.Join(outDir, "latest.json"))
	return nil
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

// report is the JSON document written under bench/results.
type report struct {
	Time      string             `json:"time"`
	GoVersion string             `json:"go_version"`
	CPUs      int                `json:"cpus"`
	Settings  settings           `json:"settings"`
	Rows      []result           `json:"rows"`
	Ratios    map[string]float64 `json:"ratios"`
	Hops      string             `json:"floor_hops"`
}

func find(rs []result, row string) (result, bool) {
	i := slices.IndexFunc(rs, func(r result) bool { return r.Row == row && r.Error == "" })
	if i < 0 {
		return result{}, false
	}
	return rs[i], true
}

// ratios are pipeline/floor (latency: lower is better for the pipeline when near 1) and
// Temporal/pipeline (latency: how many times slower Temporal is; throughput: pipeline ÷
// Temporal, how many times more calls per second the pipeline does).
func ratios(rs []result) map[string]float64 {
	out := map[string]float64{}
	p, okP := find(rs, rowPipeline)
	if !okP {
		return out
	}
	if f, ok := find(rs, rowFloor); ok {
		out["pipeline/floor latency_1 median"] = p.Latency1.MedianMs / f.Latency1.MedianMs
		out["pipeline/floor latency_10 median"] = p.Latency10.MedianMs / f.Latency10.MedianMs
		out["floor/pipeline throughput"] = f.CallsPerSec / p.CallsPerSec
	}
	for _, tr := range []string{rowTemporal, rowTemporalMem} {
		if t, ok := find(rs, tr); ok {
			out[tr+"/pipeline latency_1 median"] = t.Latency1.MedianMs / p.Latency1.MedianMs
			out[tr+"/pipeline latency_10 median"] = t.Latency10.MedianMs / p.Latency10.MedianMs
			out["pipeline/"+tr+" throughput"] = p.CallsPerSec / t.CallsPerSec
		}
	}
	return out
}

func printTable(w *os.File, rep report) {
	fmt.Fprintf(w, "\nawaken bench — %s, %s, %d CPUs; latency: %d×1-call, %d×10-call batches one at a time; throughput: %d runs × %d-call batches for %s\n\n",
		rep.Time, rep.GoVersion, rep.CPUs, rep.Settings.Iters1, rep.Settings.Iters10, rep.Settings.Runs,
		rep.Settings.BatchCalls, rep.Settings.Duration)
	fmt.Fprintf(w, "%-13s %11s %11s %12s %12s %12s %10s\n", "row", "1c median", "1c p99", "10c median", "10c p99", "calls/s", "peak RSS")
	for _, r := range rep.Rows {
		if r.Error != "" {
			fmt.Fprintf(w, "%-13s error: %s\n", r.Row, r.Error)
			continue
		}
		fmt.Fprintf(w, "%-13s %9.3fms %9.3fms %10.3fms %10.3fms %12.0f %7.1fMiB\n", r.Row,
			r.Latency1.MedianMs, r.Latency1.P99Ms, r.Latency10.MedianMs, r.Latency10.P99Ms, r.CallsPerSec, r.PeakRSSMiB)
	}
	fmt.Fprintln(w)
	keys := make([]string, 0, len(rep.Ratios))
	for k := range rep.Ratios {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-42s %8.2f×\n", k, rep.Ratios[k])
	}
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %-13s %s\n", r.Row+":", r.Desc)
	}
}

// measureRow runs the workloads against one row's target.
func measureRow(row string, s settings) (res result) {
	res.Row = row
	defer func() {
		if r := recover(); r != nil {
			res.Error = fmt.Sprint("panic: ", r)
		}
	}()
	ctx := context.Background()
	var t target
	var err error
	switch row {
	case rowPipeline:
		t, err = newPipeline(ctx, s)
	case rowFloor:
		t, err = newFloor(ctx)
	case rowTemporal:
		t, err = newTemporal(ctx, false)
	case rowTemporalMem:
		t, err = newTemporal(ctx, true)
	case rowInProcess:
		t, err = newInProcess()
	default:
		err = fmt.Errorf("unknown row %q", row)
	}
	res.Desc = describe(row)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer t.close()
	if err := measure(ctx, t, s, &res, row); err != nil {
		res.Error = err.Error()
	}
	return res
}

func describe(row string) string {
	switch row {
	case rowPipeline:
		return "the five services (app.Start) on an embedded file-storage JetStream server, public client SubmitAndWait; the soft memory limit of `awaken dev` (app.DevMemoryLimit, 160 MiB, unless GOMEMLIMIT is set)"
	case rowFloor:
		return "a logic-free relay doing the pipeline's sequential JetStream operations on the same kind of server (see floor_hops)"
	case rowTemporal:
		return "Temporal v1.30.4 lite server (temporaltest's server, SQLite in a FILE), workflow runs the calls as activities in order"
	case rowTemporalMem:
		return "Temporal v1.30.4 temporaltest.NewServer as shipped (SQLite IN MEMORY, not durable), same workflow"
	case rowInProcess:
		return "the echo tool invoked through the brain-exec registry as direct function calls, no durability"
	}
	return ""
}

// measure runs the latency series and the throughput phase.
func measure(ctx context.Context, t target, s settings, res *result, row string) error {
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
	var calls, batches atomic.Int64
	var firstErr error
	var errOnce sync.Once
	deadline := time.Now().Add(s.Duration)
	start := time.Now()
	var wg sync.WaitGroup
	for r := range s.Runs {
		wg.Go(func() {
			run := fmt.Sprintf("tp%d", r)
			for step := int64(1); time.Now().Before(deadline); step++ {
				if _, err := one(run, step, s.BatchCalls); err != nil {
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
	if err := stopProfile(); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	res.CallsPerSec = float64(calls.Load()) / elapsed.Seconds()
	res.Batches = batches.Load()
	return nil
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
