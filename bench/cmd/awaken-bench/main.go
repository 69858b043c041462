// Command awaken-bench measures the awaken pipeline side by side with the floor of its
// JetStream hops, with Temporal, and with plain function calls, in one run on this machine.
//
// The parent process runs every row in a child process of its own (the same binary with
// -row), so each row's peak RSS is its own: the parent reads the child's maximum resident
// set size from its rusage when it exits. The child measures and prints one JSON result
// line. The parent prints the table and writes bench/results/{timestamp}.json and
// bench/results/latest.json.
//
// Every durable row uses file storage: the pipeline, the floor and the single operations
// (ops) on an embedded NATS server started with the same options
// (internal/natsserver.StartEmbedded), their -cluster rows on three such servers clustered
// over the loopback with every stream and bucket R3 (cluster.go), Temporal on SQLite in a
// file (see temporal.go for the in-memory temporaltest variant, reported separately).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Row kinds. A row's name is its kind, with "-cluster" appended for a 3-node cluster
// (pipeline, floor and ops only) and "-relaxed" appended last for the relaxed durability
// level (see parseRow); "scaleout-N" runs N brain-exec instances.
const (
	rowPipeline      = "pipeline"
	rowFloor         = "floor"
	rowOps           = "ops"
	clusterSuffix    = "-cluster"
	rowTemporal      = "temporal"
	rowTemporalLocal = "temporal-local"
	rowTemporalMem   = "temporal-mem"
	rowInProcess     = "in-process"
	rowScaleOut      = "scaleout"
	throughputRuns   = 64
	throughputCalls  = 10
	// scaleOutWorkers is each brain-exec instance's worker pool in the scale-out rows:
	// small, so that one instance, not the pipeline, is the bottleneck of the slow tool.
	scaleOutWorkers = 4
)

// defaultRows is what `make bench` runs, in table order.
const defaultRows = "pipeline,floor,ops,temporal,temporal-local," +
	"pipeline-cluster,floor-cluster,ops-cluster," +
	"pipeline-relaxed,floor-relaxed,temporal-relaxed,temporal-local-relaxed," +
	"in-process,scaleout-1,scaleout-2,scaleout-4"

// level is a durability level; ratios are only taken between rows of the same level.
type level string

const (
	// levelSynced: every acknowledged write is on disk (fsync) — JetStream sync always,
	// SQLite synchronous=FULL. Survives a power loss.
	levelSynced level = "synced"
	// levelRelaxed: acknowledged writes reach the operating system; the disk follows
	// later — JetStream's default lazy sync (every 2 min), SQLite synchronous=OFF.
	// Survives a process crash, not a power loss.
	levelRelaxed level = "relaxed"
	// levelNone: nothing is durable (in-process calls, temporaltest's in-memory SQLite).
	levelNone level = "none"
)

// rowSpec is a parsed row name.
type rowSpec struct {
	name, kind string
	level      level
	executors  int  // scale-out rows: brain-exec instances
	cluster    bool // on a 3-node cluster (clusterNodes), streams and buckets R3
}

func parseRow(name string) (rowSpec, error) {
	r := rowSpec{name: name, kind: strings.TrimSuffix(name, "-relaxed"), level: levelSynced}
	if r.kind != name {
		r.level = levelRelaxed
	}
	if k := strings.TrimSuffix(r.kind, clusterSuffix); k != r.kind {
		if !slices.Contains([]string{rowPipeline, rowFloor, rowOps}, k) {
			return r, fmt.Errorf("row %q: only pipeline, floor and ops run on a cluster", name)
		}
		r.kind, r.cluster = k, true
	}
	switch {
	case r.kind == rowInProcess || r.kind == rowTemporalMem:
		r.level = levelNone
	case strings.HasPrefix(r.kind, rowScaleOut+"-"):
		n, err := strconv.Atoi(strings.TrimPrefix(r.kind, rowScaleOut+"-"))
		if err != nil || n < 1 {
			return r, fmt.Errorf("row %q: want scaleout-N with N ≥ 1", name)
		}
		// The scale-out rows measure the executors, so they run at the relaxed level,
		// where the pipeline's own ceiling is highest; the level is the same for 1, 2, 4.
		r.kind, r.executors, r.level = rowScaleOut, n, levelRelaxed
	case slices.Contains([]string{rowPipeline, rowFloor, rowOps, rowTemporal, rowTemporalLocal}, r.kind):
	default:
		return r, fmt.Errorf("unknown row %q", name)
	}
	return r, nil
}

// settings are the workload parameters shared by every row.
type settings struct {
	Iters1     int           `json:"latency_iterations_1_call"`
	Iters10    int           `json:"latency_iterations_10_calls"`
	Warmup     int           `json:"warmup_batches"`
	Duration   time.Duration `json:"-"`
	DurationS  float64       `json:"throughput_seconds"`
	Runs       int           `json:"throughput_runs"`
	BatchCalls int           `json:"throughput_batch_calls"`
	Large      string        `json:"large_parallel_batches"`
	LargeIters int           `json:"large_batch_iterations"`
	Config     string        `json:"config"`
	CPUProfile string        `json:"-"`
	MemProfile string        `json:"-"`
	WritesOnly bool          `json:"-"`
}

// stats are latency percentiles in milliseconds.
type stats struct {
	N        int     `json:"n"`
	MedianMs float64 `json:"median_ms"`
	P99Ms    float64 `json:"p99_ms"`
}

// largeBatch is the latency of one parallel batch size.
type largeBatch struct {
	Calls         int     `json:"calls"`
	Iterations    int     `json:"iterations"`
	MedianMs      float64 `json:"median_ms"`
	PerCallMs     float64 `json:"median_ms_per_call"`
	CallsPerSec   float64 `json:"calls_per_s"`
	FirstBatchErr string  `json:"error,omitempty"`
}

// result is what one row measured.
type result struct {
	Row         string       `json:"row"`
	Level       level        `json:"durability"`
	Desc        string       `json:"description"`
	Tuning      []string     `json:"tuning,omitempty"`
	Latency1    stats        `json:"latency_1_call"`
	Latency10   stats        `json:"latency_10_calls"`
	CallsPerSec float64      `json:"throughput_calls_per_s"`
	Batches     int64        `json:"throughput_batches"`
	Executors   int          `json:"executors,omitempty"`
	Nodes       int          `json:"nats_nodes,omitempty"` // the cluster rows' JetStream servers
	Writes      []writeCount `json:"writes_per_call,omitempty"`
	Large       []largeBatch `json:"large_parallel_batches,omitempty"`
	Ops         []opStat     `json:"operations,omitempty"` // the ops rows
	PeakRSSMiB  float64      `json:"peak_rss_mib"`
	// PeakRSSLoadMiB is the row process's peak RSS when the latency and throughput series
	// ended, before the write count and the large batches (ru_maxrss then).
	PeakRSSLoadMiB float64 `json:"peak_rss_load_mib,omitempty"`
	Error          string  `json:"error,omitempty"`
}

// target runs one batch of n echo calls to completion and returns the ordered outputs.
type target interface {
	run(ctx context.Context, runID string, step int64, n int) ([]string, error)
	close()
}

func main() {
	var s settings
	row := flag.String("row", "", "run one row in this process and print its JSON result (internal)")
	rows := flag.String("rows", defaultRows, "rows to run (add temporal-mem for temporaltest's untuned in-memory server)")
	out := flag.String("out", "results", "directory for the JSON results")
	temporalBin := flag.String("temporal-bin", "", "binary built with -tags temporal that runs the Temporal rows (default: this one)")
	flag.IntVar(&s.Iters1, "iters1", 100, "latency iterations of the 1-call batch")
	flag.IntVar(&s.Iters10, "iters10", 30, "latency iterations of the 10-call batch")
	flag.IntVar(&s.Warmup, "warmup", 10, "warm-up batches before each latency series")
	flag.DurationVar(&s.Duration, "duration", 5*time.Second, "throughput phase length")
	flag.StringVar(&s.Large, "large", "100,512", "pipeline rows: sizes of the large parallel batches (\"\" skips them)")
	flag.IntVar(&s.LargeIters, "large-iters", 3, "iterations of each large parallel batch")
	flag.IntVar(&s.Runs, "runs", throughputRuns, "concurrent runs in the throughput phase")
	flag.StringVar(&s.Config, "config", "../examples/awaken.yaml", "awaken host configuration")
	flag.StringVar(&s.CPUProfile, "cpuprofile", "", "pipeline row: CPU profile of the throughput phase")
	flag.StringVar(&s.MemProfile, "memprofile", "", "pipeline row: allocation profile after the throughput phase")
	flag.BoolVar(&s.WritesOnly, "writes-only", false, "only count the writes per call (no latency, throughput or large batches); with -rows, print them and write no JSON")
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
			"-large", s.Large, "-large-iters", fmt.Sprint(s.LargeIters),
			"-config", s.Config, "-cpuprofile", s.CPUProfile, "-memprofile", s.MemProfile}
		if s.WritesOnly {
			args = append(args, "-writes-only")
		}
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
		CPUs: runtime.NumCPU(), Settings: s, Rows: results, Hops: hopsDoc, Load: loadAverage(),
	}
	if s.WritesOnly {
		// No latency or throughput to compare, and nothing to replace latest.json with.
		printWrites(os.Stdout, rep)
		return nil
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
	// Load is the machine's load average when the run ended (/proc/loadavg): figures
	// taken on a loaded machine are inflated.
	Load string `json:"load_average"`
}

func find(rs []result, row string) (result, bool) {
	i := slices.IndexFunc(rs, func(r result) bool { return r.Row == row && r.Error == "" })
	if i < 0 {
		return result{}, false
	}
	return rs[i], true
}

// ratios compare rows of the same durability level only: pipeline/floor latency (near 1:
// the pipeline adds little to its JetStream hops), Temporal/pipeline latency (how many
// times slower), pipeline/Temporal throughput (how many times more calls per second), and
// the scale-out rows' throughput over one executor's.
func ratios(rs []result) map[string]float64 {
	out := map[string]float64{}
	for _, suffix := range []string{"", "-relaxed"} {
		p, okP := find(rs, rowPipeline+suffix)
		if !okP {
			continue
		}
		if f, ok := find(rs, rowFloor+suffix); ok {
			out["pipeline/floor latency_1 median"+suffix] = p.Latency1.MedianMs / f.Latency1.MedianMs
			out["pipeline/floor latency_10 median"+suffix] = p.Latency10.MedianMs / f.Latency10.MedianMs
			out["floor/pipeline throughput"+suffix] = f.CallsPerSec / p.CallsPerSec
		}
		for _, tr := range []string{rowTemporal, rowTemporalLocal} {
			if t, ok := find(rs, tr+suffix); ok {
				out[tr+"/pipeline latency_1 median"+suffix] = t.Latency1.MedianMs / p.Latency1.MedianMs
				out[tr+"/pipeline latency_10 median"+suffix] = t.Latency10.MedianMs / p.Latency10.MedianMs
				out["pipeline/"+tr+" throughput"+suffix] = p.CallsPerSec / t.CallsPerSec
			}
		}
	}
	// The cluster against one server, at the same level: what three synced replicas cost.
	for _, suffix := range []string{"", "-relaxed"} {
		p, okP := find(rs, rowPipeline+suffix)
		c, okC := find(rs, rowPipeline+clusterSuffix+suffix)
		if okP && okC {
			out["pipeline-cluster/pipeline latency_1 median"+suffix] = c.Latency1.MedianMs / p.Latency1.MedianMs
			out["pipeline-cluster/pipeline latency_10 median"+suffix] = c.Latency10.MedianMs / p.Latency10.MedianMs
			out["pipeline/pipeline-cluster throughput"+suffix] = p.CallsPerSec / c.CallsPerSec
		}
		if f, ok := find(rs, rowFloor+clusterSuffix+suffix); ok && okC {
			out["pipeline-cluster/floor-cluster latency_1 median"+suffix] = c.Latency1.MedianMs / f.Latency1.MedianMs
			out["pipeline-cluster/floor-cluster latency_10 median"+suffix] = c.Latency10.MedianMs / f.Latency10.MedianMs
			out["floor-cluster/pipeline-cluster throughput"+suffix] = f.CallsPerSec / c.CallsPerSec
		}
		o, okO := find(rs, rowOps+suffix)
		oc, okOC := find(rs, rowOps+clusterSuffix+suffix)
		if okO && okOC && len(o.Ops) == len(oc.Ops) {
			for i := range o.Ops {
				if o.Ops[i].MedianMs > 0 {
					out["ops-cluster/ops "+o.Ops[i].Op+" median"+suffix] = oc.Ops[i].MedianMs / o.Ops[i].MedianMs
				}
			}
		}
	}
	if one, ok := find(rs, rowScaleOut+"-1"); ok && one.CallsPerSec > 0 {
		for _, r := range rs {
			if strings.HasPrefix(r.Row, rowScaleOut+"-") && r.Row != one.Row && r.Error == "" {
				out[r.Row+"/scaleout-1 throughput"] = r.CallsPerSec / one.CallsPerSec
			}
		}
	}
	return out
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

// loadAverage is the first three fields of /proc/loadavg ("" where there is none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func printTable(w io.Writer, rep report) {
	fmt.Fprintf(w, "\nawaken bench — %s, %s, %d CPUs, load average %s; latency: %d×1-call, %d×10-call sequential batches one at a time; throughput: %d runs × %d-call batches for %s\n\n",
		rep.Time, rep.GoVersion, rep.CPUs, rep.Load, rep.Settings.Iters1, rep.Settings.Iters10, rep.Settings.Runs,
		rep.Settings.BatchCalls, rep.Settings.Duration)
	fmt.Fprintf(w, "%-24s %-8s %11s %11s %12s %12s %10s %10s\n", "row", "level", "1c median", "1c p99", "10c median", "10c p99", "calls/s", "peak RSS")
	for _, r := range rep.Rows {
		if r.Error != "" {
			fmt.Fprintf(w, "%-24s %-8s error: %s\n", r.Row, r.Level, r.Error)
			continue
		}
		if len(r.Ops) > 0 {
			fmt.Fprintf(w, "%-24s %-8s %11s %11s %12s %12s %10s %7.1fMiB  (single operations, below)\n", r.Row, r.Level,
				"", "", "", "", "", r.PeakRSSMiB)
			continue
		}
		if r.Executors > 0 {
			fmt.Fprintf(w, "%-24s %-8s %11s %11s %12s %12s %10.0f %7.1fMiB  (%d× brain-exec, %d workers each, slow %d ms)\n", r.Row, r.Level,
				"", "", "", "", r.CallsPerSec, r.PeakRSSMiB, r.Executors, scaleOutWorkers, slowToolMS)
			continue
		}
		fmt.Fprintf(w, "%-24s %-8s %9.3fms %9.3fms %10.3fms %10.3fms %10.0f %7.1fMiB\n", r.Row, r.Level,
			r.Latency1.MedianMs, r.Latency1.P99Ms, r.Latency10.MedianMs, r.Latency10.P99Ms, r.CallsPerSec, r.PeakRSSMiB)
	}
	fmt.Fprintln(w)
	for _, r := range rep.Rows {
		printRowWrites(w, r)
		if r.PeakRSSLoadMiB > 0 && len(r.Large) > 0 {
			fmt.Fprintf(w, "  %-24s peak RSS %.1fMiB through the latency and throughput series (%.1fMiB with the large batches)\n", r.Row, r.PeakRSSLoadMiB, r.PeakRSSMiB)
		}
		for _, l := range r.Large {
			fmt.Fprintf(w, "  %-24s parallel %3d calls: median %9.1fms, %6.2fms/call, %6.0f calls/s %s\n", r.Row, l.Calls, l.MedianMs, l.PerCallMs, l.CallsPerSec, l.FirstBatchErr)
		}
		for _, o := range r.Ops {
			fmt.Fprintf(w, "  %-24s %-19s median %8.3fms, p99 %8.3fms, %6.2f publishes\n", r.Row, o.Op, o.MedianMs, o.P99Ms, o.InPublishes)
		}
	}
	fmt.Fprintln(w)
	keys := make([]string, 0, len(rep.Ratios))
	for k := range rep.Ratios {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-50s %8.2f×\n", k, rep.Ratios[k])
	}
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %-24s %s\n", r.Row+":", r.Desc)
	}
}

// printRowWrites prints r's write counts, one line per path.
func printRowWrites(w io.Writer, r result) {
	for _, wc := range r.Writes {
		fmt.Fprintf(w, "  %-24s %-26s %5.2f stored msgs/call, %5.2f JS API req/call:", r.Row, wc.Path, wc.StoredPerCall, wc.APIPerCall)
		for _, n := range streamsByCost(wc) {
			fmt.Fprintf(w, " %s %.2f", n, wc.ByStream[n])
		}
		fmt.Fprintln(w)
	}
}

// printWrites is the report of a -writes-only run: each row's write counts (or error).
func printWrites(w io.Writer, rep report) {
	fmt.Fprintf(w, "\nawaken bench — %s, %s, %d CPUs, load average %s; writes only: stored messages and JetStream API requests per call, from the servers' counters\n\n",
		rep.Time, rep.GoVersion, rep.CPUs, rep.Load)
	for _, r := range rep.Rows {
		if r.Error != "" {
			fmt.Fprintf(w, "  %-24s error: %s\n", r.Row, r.Error)
			continue
		}
		printRowWrites(w, r)
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
	spec, err := parseRow(row)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Level, res.Desc = spec.level, describe(spec)
	if spec.cluster {
		res.Nodes = clusterNodes
		// The large parallel batches are left to the single-server rows: on the
		// cluster they would take longer than the rest of the row.
		s.Large = ""
	}
	ctx := context.Background()
	var t target
	switch spec.kind {
	case rowPipeline:
		t, err = newPipeline(ctx, s, spec.level, spec.cluster, 1, 0)
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
		if p, err = newPipeline(ctx, s, spec.level, false, spec.executors, scaleOutWorkers); err == nil {
			defer p.close()
			if err := measureScaleOut(ctx, p, s, &res); err != nil {
				res.Error = err.Error()
			}
		}
		if err != nil {
			res.Error = err.Error()
		}
		return res
	case rowFloor:
		t, err = newFloor(ctx, spec.level, spec.cluster)
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
	if err := measure(ctx, t, s, &res, profiled); err != nil {
		res.Error = err.Error()
		return res
	}
	res.PeakRSSLoadMiB = peakRSSMiB()
	if sr, ok := t.(serverRow); ok {
		if err := measureWrites(ctx, t, sr, &res); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	if p, ok := t.(*pipeline); ok {
		if err := measureLarge(ctx, p, s, &res); err != nil {
			res.Error = err.Error()
		}
	}
	return res
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
// parallel path (10-call delegate batches).
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
func measureScaleOut(ctx context.Context, p *pipeline, s settings, res *result) error {
	p.tool = "slow"
	// One warm-up batch per executor's worth of calls.
	if _, err := p.run(ctx, "warm", 1, 1); err != nil {
		return err
	}
	calls, batches, err := throughput(ctx, s, func(ctx context.Context, run string, step int64) error {
		out, err := p.run(ctx, run, step, s.BatchCalls)
		if err == nil && (len(out) != s.BatchCalls || out[0] != "done") {
			err = fmt.Errorf("slow batch %s/%d: outputs %q", run, step, out)
		}
		return err
	})
	res.CallsPerSec, res.Batches = calls, batches
	return err
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
	calls, batches, err := throughput(ctx, s, func(ctx context.Context, run string, step int64) error {
		_, err := one(run, step, s.BatchCalls)
		return err
	})
	if serr := stopProfile(); serr != nil && err == nil {
		err = serr
	}
	res.CallsPerSec, res.Batches = calls, batches
	return err
}

// throughput runs s.Runs concurrent runs, each submitting batches of s.BatchCalls calls
// one after the other through batch until s.Duration has passed, and returns the calls
// per second and the batches completed.
func throughput(ctx context.Context, s settings, batch func(ctx context.Context, run string, step int64) error) (float64, int64, error) {
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
