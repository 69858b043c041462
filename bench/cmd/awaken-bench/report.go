package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
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
	scalingRatios(rs, out)
	if one, ok := find(rs, rowScaleOut+"-1"); ok && one.CallsPerSec > 0 {
		for _, r := range rs {
			if strings.HasPrefix(r.Row, rowScaleOut+"-") && r.Row != one.Row && r.Error == "" {
				out[r.Row+"/scaleout-1 throughput"] = r.CallsPerSec / one.CallsPerSec
			}
		}
	}
	return out
}

// scalingRatios adds the scaling rows' ratios to out, within one kind of row and level:
// each P's throughput over P = 1's (pipeline-p4/pipeline-p1, floor-cluster-p3/floor-cluster-p1),
// and the floor over the pipeline at the same P (floor-p4/pipeline-p4, near 1 when the
// pipeline adds little to its JetStream operations).
func scalingRatios(rs []result, out map[string]float64) {
	for _, r := range rs {
		if r.Partitions == 0 || r.Error != "" || r.CallsPerSec == 0 {
			continue
		}
		spec, err := parseRow(r.Row)
		if err != nil {
			continue
		}
		suffix := ""
		if spec.level == levelRelaxed {
			suffix = "-relaxed"
		}
		kind := spec.kind
		if spec.cluster {
			kind += clusterSuffix
		}
		name := func(k string, p int) string { return fmt.Sprintf("%s-p%d%s", k, p, suffix) }
		if r.Partitions > 1 {
			if one, ok := find(rs, name(kind, 1)); ok && one.CallsPerSec > 0 {
				out[r.Row+"/"+one.Row+" throughput"] = r.CallsPerSec / one.CallsPerSec
			}
		}
		if spec.kind == rowPipeline {
			floorKind := strings.Replace(kind, rowPipeline, rowFloor, 1)
			if f, ok := find(rs, name(floorKind, r.Partitions)); ok {
				out[f.Row+"/"+r.Row+" throughput"] = f.CallsPerSec / r.CallsPerSec
				out[r.Row+"/"+f.Row+" latency_1 median"] = r.Latency1.MedianMs / f.Latency1.MedianMs
			}
		}
	}
}

// callsStream matches the stream of a calls bucket, the pipeline's or the floor's, of
// partition 0 (no suffix) or k ("_p{k}").
var callsStream = regexp.MustCompile(`^KV_[A-Z0-9_]*_calls(?:_p([0-9]+))?$`)

// partitionShares is how the call records a scaling row's throughput phase stored spread
// over its partitions, partition 0 first ("50% 50%").
func partitionShares(r result) string {
	per := make([]uint64, max(r.Partitions, 1))
	var total uint64
	for name, n := range r.ThroughputStored {
		m := callsStream.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		k := 0
		if m[1] != "" {
			k, _ = strconv.Atoi(m[1])
		}
		if k < len(per) {
			per[k] += n
			total += n
		}
	}
	if total == 0 {
		return "none counted"
	}
	parts := make([]string, len(per))
	for k, n := range per {
		parts[k] = fmt.Sprintf("%.0f%%", 100*float64(n)/float64(total))
	}
	return strings.Join(parts, " ")
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
	fmt.Fprintf(w, "\nawaken bench — %s, %s, %d CPUs, load average %s; latency: %d×1-call, %d×10-call sequential batches one at a time; throughput: %d runs × %d-call batches for %s (the -pN rows: %d runs a partition, at least as many in all)\n\n",
		rep.Time, rep.GoVersion, rep.CPUs, rep.Load, rep.Settings.Iters1, rep.Settings.Iters10, rep.Settings.Runs,
		rep.Settings.BatchCalls, rep.Settings.Duration, runsPerPartition)
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
		if r.Partitions > 0 {
			fmt.Fprintf(w, "  %-24s %d partition(s), %d runs in the throughput phase; call records stored per partition there: %s\n",
				r.Row, r.Partitions, r.Runs, partitionShares(r))
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
