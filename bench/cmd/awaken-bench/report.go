package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

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
		for _, b := range r.IOBound {
			fmt.Fprintf(w, "  %-24s %-10s %2d calls of %s (%d ms of I/O each): median %9.1fms\n", r.Row, b.Mode, b.Calls, b.Tool, slowToolMS, b.MedianMs)
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
