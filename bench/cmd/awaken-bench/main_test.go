package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestParseRow: a row's name gives its kind, its durability level (synced unless
// -relaxed; none for in-process), its executors and whether it runs on the cluster.
func TestParseRow(t *testing.T) {
	for name, want := range map[string]rowSpec{
		"pipeline":                 {kind: rowPipeline, level: levelSynced},
		"floor-relaxed":            {kind: rowFloor, level: levelRelaxed},
		"temporal-local-relaxed":   {kind: rowTemporalLocal, level: levelRelaxed},
		"in-process":               {kind: rowInProcess, level: levelNone},
		"scaleout-4":               {kind: rowScaleOut, level: levelRelaxed, executors: 4},
		"pipeline-cluster":         {kind: rowPipeline, level: levelSynced, cluster: true},
		"floor-cluster":            {kind: rowFloor, level: levelSynced, cluster: true},
		"ops-cluster-relaxed":      {kind: rowOps, level: levelRelaxed, cluster: true},
		"ops":                      {kind: rowOps, level: levelSynced},
		"pipeline-cluster-relaxed": {kind: rowPipeline, level: levelRelaxed, cluster: true},
		"pipeline-p4":              {kind: rowPipeline, level: levelSynced, partitions: 4},
		"floor-p8":                 {kind: rowFloor, level: levelSynced, partitions: 8},
		"pipeline-cluster-p3":      {kind: rowPipeline, level: levelSynced, cluster: true, partitions: 3},
		"floor-cluster-p1-relaxed": {kind: rowFloor, level: levelRelaxed, cluster: true, partitions: 1},
	} {
		got, err := parseRow(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want.name = name
		if got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	for _, bad := range []string{"pipelines", "scaleout-0", "scaleout-x",
		"temporal-cluster", "scaleout-2-cluster", "in-process-cluster", "pipeline-relaxed-cluster",
		"pipeline-p0", "ops-p2", "temporal-p2", "pipeline-p2-cluster", "pipeline-p2-relaxed-cluster"} {
		if _, err := parseRow(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestDefaultRowsParse: every row `make bench` runs has a valid name, and the cluster
// rows are among them, the scaling rows' included; -rows scaling names the scaling rows.
func TestDefaultRowsParse(t *testing.T) {
	var cluster []string
	for _, name := range strings.Split(defaultRows, ",") {
		r, err := parseRow(name)
		if err != nil {
			t.Errorf("default row %q: %v", name, err)
		}
		if r.cluster {
			cluster = append(cluster, name)
		}
	}
	if strings.Join(cluster, ",") != "pipeline-cluster,floor-cluster,ops-cluster,"+
		"pipeline-cluster-p1,floor-cluster-p1,pipeline-cluster-p3,floor-cluster-p3" {
		t.Errorf("default cluster rows %q", cluster)
	}
	scaling := expandRows("scaling")
	for _, name := range scaling {
		if r, err := parseRow(name); err != nil || r.partitions == 0 {
			t.Errorf("scaling row %q: %+v, %v", name, r, err)
		}
	}
	if got := expandRows("pipeline, scaling"); len(got) != 1+len(scaling) || got[0] != "pipeline" {
		t.Errorf("-rows 'pipeline, scaling': %q", got)
	}
}

// testConfig is the example host configuration, from this package's directory.
const testConfig = "../../../examples/awaken.yaml"

// testPipeline starts the pipeline of testConfig at lvl, on three clustered nodes or one
// server, with one executor and partitions partitions (0: the configuration's), under a
// context that ends after three minutes or with t. The caller closes it.
func testPipeline(t *testing.T, lvl level, cluster bool, partitions int) (context.Context, *pipeline) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p, err := newPipeline(ctx, settings{Config: testConfig}, lvl, cluster, 1, 0, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, p
}

// TestPipelineClusterRow: the cluster row's pipeline starts on three clustered nodes with
// every stream R3, runs 1- and 10-call batches with their outputs in order, the write
// counters read the cluster, and close stops every node and removes their stores.
func TestPipelineClusterRow(t *testing.T) {
	ctx, p := testPipeline(t, levelSynced, true, 0)
	closed := false
	defer func() {
		if !closed {
			p.close()
		}
	}()
	if n := len(p.servers()); n != clusterNodes {
		t.Fatalf("%d nodes, want %d", n, clusterNodes)
	}
	for _, srv := range p.servers() {
		if srv.Addr().(*net.TCPAddr).IP.String() != "127.0.0.1" || srv.ClusterAddr().IP.String() != "127.0.0.1" {
			t.Errorf("%s listens on %s and %s, want the loopback only", srv.Name(), srv.Addr(), srv.ClusterAddr())
		}
	}
	js, err := jetstream.New(p.client.Conn())
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.Stream(ctx, p.stack.Env.Names.RunRecordsStream())
	if err != nil {
		t.Fatal(err)
	}
	if r := info.CachedInfo().Config.Replicas; r != clusterNodes {
		t.Errorf("run records' stream: %d replicas, want %d", r, clusterNodes)
	}
	wc, err := countWrites(ctx, p.servers(), "cluster 1-call", 2, 1, p.run)
	if err != nil {
		t.Fatal(err)
	}
	if wc.StoredPerCall == 0 {
		t.Errorf("no stored messages counted on the cluster: %+v", wc)
	}
	out, err := p.run(ctx, "t10", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 10 || out[0] != "x0" || out[9] != "x9" {
		t.Errorf("10-call batch: outputs %q", out)
	}
	dirs := p.nats.dirs
	p.close()
	closed = true
	for _, srv := range p.servers() {
		if srv.Running() {
			t.Errorf("%s still running after close", srv.Name())
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("store %s left after close (%v)", d, err)
		}
	}
}

// TestOpsClusterRow: the cluster's single-operation row measures every operation.
func TestOpsClusterRow(t *testing.T) {
	res := measureRow("ops-cluster", settings{Iters1: 3, Warmup: 1})
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	if res.Nodes != clusterNodes || len(res.Ops) != 3+len(opsBatchSizes) {
		t.Fatalf("nodes %d, operations %+v", res.Nodes, res.Ops)
	}
	for _, o := range res.Ops {
		if o.N != 3 || o.MedianMs <= 0 || o.InPublishes <= 0 {
			t.Errorf("%+v", o)
		}
	}
}

// TestRatios: a ratio compares rows of one durability level only (no synced row with a
// relaxed one), the cluster rows with the single server at the same level, and the ops
// rows operation by operation.
func TestRatios(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []result
		want map[string]float64
		// wrong says why a ratio named k may not be there, "" when it may.
		wrong func(k string) string
	}{{
		name: "levels",
		rows: []result{
			{Row: "pipeline", Latency1: stats{MedianMs: 10}, Latency10: stats{MedianMs: 20}, CallsPerSec: 100},
			{Row: "temporal", Latency1: stats{MedianMs: 100}, Latency10: stats{MedianMs: 400}, CallsPerSec: 10},
			{Row: "pipeline-relaxed", Latency1: stats{MedianMs: 5}, Latency10: stats{MedianMs: 10}, CallsPerSec: 400},
			{Row: "temporal-relaxed", Latency1: stats{MedianMs: 20}, Latency10: stats{MedianMs: 200}, CallsPerSec: 40},
		},
		want: map[string]float64{
			"temporal/pipeline latency_1 median":         10,
			"temporal/pipeline latency_1 median-relaxed": 4,
			"pipeline/temporal throughput":               10,
			"pipeline/temporal throughput-relaxed":       10,
		},
		wrong: func(k string) string {
			if strings.Contains(k, "relaxed") != strings.HasSuffix(k, "-relaxed") {
				return "mixes levels"
			}
			return ""
		},
	}, {
		name: "cluster",
		rows: []result{
			{Row: "pipeline", Latency1: stats{MedianMs: 10}, Latency10: stats{MedianMs: 40}, CallsPerSec: 300},
			{Row: "pipeline-cluster", Latency1: stats{MedianMs: 25}, Latency10: stats{MedianMs: 60}, CallsPerSec: 100},
			{Row: "pipeline-cluster-relaxed", Latency1: stats{MedianMs: 1}, Latency10: stats{MedianMs: 1}, CallsPerSec: 1},
			{Row: "ops", Ops: []opStat{{Op: "publish", MedianMs: 0.5}, {Op: "atomic batch of 2", MedianMs: 6}}},
			{Row: "ops-cluster", Ops: []opStat{{Op: "publish", MedianMs: 1}, {Op: "atomic batch of 2", MedianMs: 1.5}}},
		},
		want: map[string]float64{
			"pipeline-cluster/pipeline latency_1 median":  2.5,
			"pipeline-cluster/pipeline latency_10 median": 1.5,
			"pipeline/pipeline-cluster throughput":        3,
			"ops-cluster/ops publish median":              2,
			"ops-cluster/ops atomic batch of 2 median":    0.25,
		},
		wrong: func(k string) string {
			if strings.HasSuffix(k, "-relaxed") {
				return "no relaxed single-server row to compare with"
			}
			return ""
		},
	}, {
		name: "scaling",
		rows: []result{
			{Row: "pipeline-p1", Partitions: 1, Latency1: stats{MedianMs: 3}, CallsPerSec: 100},
			{Row: "floor-p1", Partitions: 1, Latency1: stats{MedianMs: 2}, CallsPerSec: 150},
			{Row: "pipeline-p4", Partitions: 4, Latency1: stats{MedianMs: 3}, CallsPerSec: 200},
			{Row: "floor-p4", Partitions: 4, Latency1: stats{MedianMs: 2}, CallsPerSec: 500},
			{Row: "pipeline-cluster-p1", Partitions: 1, CallsPerSec: 50},
			{Row: "pipeline-cluster-p3", Partitions: 3, CallsPerSec: 150},
			{Row: "pipeline-p4-relaxed", Partitions: 4, CallsPerSec: 900},
		},
		want: map[string]float64{
			"pipeline-p4/pipeline-p1 throughput":                 2,
			"floor-p4/floor-p1 throughput":                       500.0 / 150,
			"floor-p4/pipeline-p4 throughput":                    2.5,
			"floor-p1/pipeline-p1 throughput":                    1.5,
			"pipeline-p1/floor-p1 latency_1 median":              1.5,
			"pipeline-cluster-p3/pipeline-cluster-p1 throughput": 3,
		},
		wrong: func(k string) string {
			if strings.Contains(k, "relaxed") || strings.Contains(k, "cluster-p3/pipeline-p") {
				return "mixes levels or the cluster with one node"
			}
			return ""
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := ratios(tc.rows)
			for k, want := range tc.want {
				if r[k] != want {
					t.Errorf("%s = %v, want %v (all: %v)", k, r[k], want, r)
				}
			}
			for k := range r {
				if why := tc.wrong(k); why != "" {
					t.Errorf("ratio %q: %s", k, why)
				}
			}
		})
	}
}

// TestFloorStoresWhatThePipelineStores: the floor relay writes, stream by stream, the
// messages the pipeline stores for the same batches (floor_hops): its streams and buckets
// are the pipeline's named FLOOR_ for AWAKEN_. Only the archive varies, in both: one
// write per batch, or two when the next batch's claim archives it before the publisher
// does. The floor's one JetStream API request per call is the gate's pause read. At two
// partitions, each run's messages go to the same partition's stores in both (the
// partitioned stores' names are the pipeline's with FLOOR for AWAKEN).
func TestFloorStoresWhatThePipelineStores(t *testing.T) {
	for _, parts := range []int{1, 2} {
		t.Run(fmt.Sprintf("p%d", parts), func(t *testing.T) { floorStoresWhatThePipelineStores(t, parts) })
	}
}

func floorStoresWhatThePipelineStores(t *testing.T, parts int) {
	ctx, p := testPipeline(t, levelRelaxed, false, parts)
	defer p.close()
	f, err := newFloor(ctx, levelRelaxed, false, parts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	prefix := strings.TrimSuffix(p.stack.Env.Names.SubmissionsStream(), "_SUBMISSIONS") // AWAKEN
	archives := map[string]bool{}
	for _, pn := range p.stack.Env.Names.EachPartition() {
		archives["KV_"+pn.BatchesBucket()] = true
	}
	for _, path := range []struct {
		name       string
		batches, n int
	}{{"sequential 1-call", 4, 1}, {"sequential 10-call", 2, 10}} {
		pw, err := countWrites(ctx, p.servers(), path.name, path.batches, path.n, p.run)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := countWrites(ctx, f.servers(), path.name, path.batches, path.n, f.run)
		if err != nil {
			t.Fatal(err)
		}
		stored := func(wc writeCount, stream string) float64 { return wc.ByStream[stream] * float64(wc.Calls) }
		floorAs := map[string]string{}
		for s := range fw.ByStream {
			floorAs[strings.Replace(s, "FLOOR", prefix, 1)] = s
		}
		for s := range pw.ByStream {
			if _, ok := floorAs[s]; !ok {
				floorAs[s] = "(none)"
			}
		}
		for ps, fs := range floorAs {
			got, want := stored(fw, fs), stored(pw, ps)
			if archives[ps] && (got > 0 || want > 0) {
				b := float64(path.batches)
				if got < b || got > 2*b || want < b || want > 2*b {
					t.Errorf("%s: %s stored %v, %s %v; want %v to %v each", path.name, fs, got, ps, want, b, 2*b)
				}
				continue
			}
			if got != want {
				t.Errorf("%s: %s stored %v, the pipeline's %s %v", path.name, fs, got, ps, want)
			}
		}
		if fw.APIPerCall != 1 {
			t.Errorf("%s: the floor made %v JetStream API requests per call, want 1 (the pause read)", path.name, fw.APIPerCall)
		}
		t.Logf("%s: pipeline %.2f, floor %.2f stored messages per call", path.name, pw.StoredPerCall, fw.StoredPerCall)
	}
}

// TestFloorPartitions: the floor at P = 2 keeps each run's records in its partition: the
// batches of a run write the calls and runs buckets and the audit and results streams of
// the run's partition (partitionOf) and nothing of the other's.
func TestFloorPartitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const parts = 2
	f, err := newFloor(ctx, levelRelaxed, false, parts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	partStreams := func(i int) []string {
		p := floorPartitions(parts)[i]
		return []string{"KV_" + p.callsKV, "KV_" + p.runsKV, "KV_" + p.batchesKV, p.audit, p.results}
	}
	for want := range parts {
		// countWrites runs "count-{path}": a path whose run is in partition want.
		path := ""
		for i := 0; path == ""; i++ {
			if name := fmt.Sprintf("p%d-%d", want, i); partitionOf("count-"+name, parts) == want {
				path = name
			}
		}
		wc, err := countWrites(ctx, f.servers(), path, 2, 10, f.run)
		if err != nil {
			t.Fatal(err)
		}
		for i := range parts {
			for _, s := range partStreams(i) {
				if got := wc.ByStream[s] > 0; got != (i == want) {
					t.Errorf("run of partition %d: %s stored %v per call", want, s, wc.ByStream[s])
				}
			}
		}
	}
}

// TestScalingRow: a floor-pN row runs its throughput phase with runsPerPartition runs per
// partition, as many in each, and its load reaches every partition.
func TestScalingRow(t *testing.T) {
	res := measureRow("floor-p2-relaxed", settings{Iters1: 2, Iters10: 1, Warmup: 1, Duration: time.Second, Runs: 4, BatchCalls: 10})
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	if res.Partitions != 2 || res.Runs != 2*runsPerPartition || res.CallsPerSec <= 0 {
		t.Fatalf("partitions %d, runs %d, %v calls/s", res.Partitions, res.Runs, res.CallsPerSec)
	}
	for _, p := range floorPartitions(2) {
		if res.ThroughputStored["KV_"+p.callsKV] == 0 {
			t.Errorf("no call record stored in %s: %v", p.callsKV, res.ThroughputStored)
		}
	}
	if sh := strings.Fields(partitionShares(res)); len(sh) != 2 || sh[0] == "0%" || sh[1] == "0%" {
		t.Errorf("partition shares %q", sh)
	}
	ids := throughputRunIDs(40, 8)
	per := map[int]int{}
	for _, id := range ids {
		per[partitionOf(id, 8)]++
	}
	if len(ids) != 40 || len(per) != 8 {
		t.Fatalf("%d run ids over %d partitions", len(ids), len(per))
	}
	for p, n := range per {
		if n != 5 {
			t.Errorf("partition %d holds %d runs, want 5", p, n)
		}
	}
}
