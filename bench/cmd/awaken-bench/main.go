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
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Row kinds. A row's name is its kind, with "-cluster" appended for a 3-node cluster
// (pipeline, floor and ops only), then "-pN" for a scaling row at N partitions (pipeline
// and floor only), and "-relaxed" appended last for the relaxed durability level (see
// parseRow); "scaleout-N" runs N brain-exec instances.
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
	// runsPerPartition is the concurrent runs per partition in the throughput phase of
	// the scaling rows, at least -runs in all: a run of sequential batches has one
	// message in flight at a time, and the busiest consumer, brain-exec, has 16 workers
	// (examples/awaken.yaml), so 16 runs can keep every consumer of a partition busy.
	runsPerPartition = 16
	// scaleOutWorkers is each brain-exec instance's worker pool in the scale-out rows:
	// small, so that one instance, not the pipeline, is the bottleneck of the slow tool.
	scaleOutWorkers = 4
)

// defaultRows is what `make bench` runs, in table order.
const defaultRows = "pipeline,floor,ops,temporal,temporal-local," +
	"pipeline-cluster,floor-cluster,ops-cluster," +
	"pipeline-relaxed,floor-relaxed,temporal-relaxed,temporal-local-relaxed," +
	"in-process,scaleout-1,scaleout-2,scaleout-4," + scalingRows

// scalingRows are the partition rows (synced): the pipeline and its floor at P = 1, 2, 4
// and 8 on one node, and at P = 1 and 3 on the 3-node cluster. `-rows scaling` runs only
// these.
const scalingRows = "pipeline-p1,floor-p1,pipeline-p2,floor-p2,pipeline-p4,floor-p4,pipeline-p8,floor-p8," +
	"pipeline-cluster-p1,floor-cluster-p1,pipeline-cluster-p3,floor-cluster-p3"

// rowSets are names -rows accepts for a list of rows.
var rowSets = map[string]string{"default": defaultRows, "scaling": scalingRows}

// expandRows is the list of rows named by -rows: row names and row sets, comma-separated.
func expandRows(list string) []string {
	var rows []string
	for _, r := range strings.Split(list, ",") {
		r = strings.TrimSpace(r)
		if set, ok := rowSets[r]; ok {
			rows = append(rows, strings.Split(set, ",")...)
		} else if r != "" {
			rows = append(rows, r)
		}
	}
	return rows
}

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
	// partitions is the scaling rows' P (storage.partitions, and the floor's); 0 for every
	// other row, which runs the configuration's.
	partitions int
}

func parseRow(name string) (rowSpec, error) {
	r := rowSpec{name: name, kind: strings.TrimSuffix(name, "-relaxed"), level: levelSynced}
	if r.kind != name {
		r.level = levelRelaxed
	}
	if i := strings.LastIndex(r.kind, "-p"); i > 0 {
		if n, err := strconv.Atoi(r.kind[i+2:]); err == nil {
			base := strings.TrimSuffix(r.kind[:i], clusterSuffix)
			if n < 1 || (base != rowPipeline && base != rowFloor) {
				return r, fmt.Errorf("row %q: want pipeline-pN or floor-pN (-cluster before -pN) with N ≥ 1", name)
			}
			r.kind, r.partitions = r.kind[:i], n
		}
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
	// CPUPerCall: the rows run the -cpu-per-call phases (measureCPU) only, CPURepeat
	// times each, CPUCalls calls per sequential phase.
	CPUPerCall bool `json:"-"`
	CPUCalls   int  `json:"-"`
	CPURepeat  int  `json:"-"`
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

// ioBatch is the latency of one 10-call batch of I/O-bound calls (slowToolMS each), run
// one call after another (the slow tool) or concurrently (the lookup tool, which declares
// parallel).
type ioBatch struct {
	Mode       string  `json:"mode"`
	Tool       string  `json:"tool"`
	Calls      int     `json:"calls"`
	Iterations int     `json:"iterations"`
	MedianMs   float64 `json:"median_ms"`
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
	IOBound     []ioBatch    `json:"io_bound_10_calls,omitempty"`
	Ops         []opStat     `json:"operations,omitempty"`   // the ops rows
	CPU         []cpuPhase   `json:"cpu_per_call,omitempty"` // -cpu-per-call
	PeakRSSMiB  float64      `json:"peak_rss_mib"`
	// PeakRSSLoadMiB is the row process's peak RSS when the latency and throughput series
	// ended, before the write count and the large batches (ru_maxrss then).
	PeakRSSLoadMiB float64 `json:"peak_rss_load_mib,omitempty"`
	Error          string  `json:"error,omitempty"`

	// Partitions is the scaling rows' P: storage.partitions, or the floor's partitions.
	Partitions int `json:"partitions,omitempty"`
	// Runs is the concurrent runs of the throughput phase.
	Runs int `json:"throughput_runs,omitempty"`
	// ThroughputStored is what the throughput phase stored, per stream (the servers'
	// counters before and after it): how the load spread over the partitions.
	ThroughputStored map[string]uint64 `json:"throughput_stored_by_stream,omitempty"`
}

// target runs one batch of n echo calls to completion and returns the ordered outputs.
type target interface {
	run(ctx context.Context, runID string, step int64, n int) ([]string, error)
	close()
}

func main() {
	var s settings
	row := flag.String("row", "", "run one row in this process and print its JSON result (internal)")
	rows := flag.String("rows", "default", "rows to run, and row sets: default (what `make bench` runs), scaling (the partition rows); add temporal-mem for temporaltest's untuned in-memory server")
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
	flag.BoolVar(&s.CPUPerCall, "cpu-per-call", false, "only measure the process CPU per call (getrusage) of sequential 1- and 10-call batches and of the throughput phase, each row -cpu-repeat times; with -cpuprofile, a CPU profile of each phase (FILE.ROW.N.PHASE); print, write no JSON")
	flag.IntVar(&s.CPUCalls, "cpu-calls", 1000, "-cpu-per-call: calls of each sequential phase")
	flag.IntVar(&s.CPURepeat, "cpu-repeat", 3, "-cpu-per-call: runs of each row (a process each); the median is printed")
	flag.Parse()
	s.DurationS = s.Duration.Seconds()
	s.BatchCalls = throughputCalls
	if *row != "" {
		res := measureRow(*row, s)
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if err := parent(expandRows(*rows), *out, *temporalBin, s); err != nil {
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
	repeat := 1
	if s.CPUPerCall {
		repeat = max(s.CPURepeat, 1)
	}
	for _, r := range slices.Repeat(rows, repeat) {
		r = strings.TrimSpace(r)
		fmt.Fprintf(os.Stderr, "== %s\n", r)
		profile := s.CPUProfile
		if s.CPUPerCall && profile != "" {
			profile = fmt.Sprintf("%s.%s.%d", profile, r, len(results)/len(rows)+1)
		}
		args := []string{"-row", r, "-iters1", fmt.Sprint(s.Iters1), "-iters10", fmt.Sprint(s.Iters10),
			"-warmup", fmt.Sprint(s.Warmup), "-duration", s.Duration.String(), "-runs", fmt.Sprint(s.Runs),
			"-large", s.Large, "-large-iters", fmt.Sprint(s.LargeIters),
			"-config", s.Config, "-cpuprofile", profile, "-memprofile", s.MemProfile}
		if s.WritesOnly {
			args = append(args, "-writes-only")
		}
		if s.CPUPerCall {
			args = append(args, "-cpu-per-call", "-cpu-calls", fmt.Sprint(s.CPUCalls))
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
	if s.CPUPerCall {
		printCPU(os.Stdout, results)
		return nil
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
