package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

type jetstreamAPI = jetstream.JetStream

func newJetStream(nc *nats.Conn) (jetstream.JetStream, error) { return jetstream.New(nc) }

// latency is a series of probe batches in milliseconds.
type latency struct {
	N     int     `json:"n"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

func percentiles(d []time.Duration) latency {
	if len(d) == 0 {
		return latency{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1e3
	}
	return latency{N: len(d), P50Ms: at(0.50), P99Ms: at(0.99), MaxMs: at(1)}
}

// store is one stream's (or bucket's) state at a sample.
type store struct {
	Bytes int64  `json:"disk_bytes"` // its directory under the data directory, allocated blocks
	Msgs  uint64 `json:"messages"`
	Keys  uint64 `json:"subjects"` // distinct subjects: a bucket's keys
}

// sample is the state of the soak at one instant.
type sample struct {
	T       float64 `json:"t_s"`
	Calls   int64   `json:"calls"`
	Batches int64   `json:"batches"`
	Errors  int64   `json:"errors"`
	memory
	Probe  latency          `json:"probe"`
	Disk   int64            `json:"disk_bytes"`
	Stores map[string]store `json:"stores"`
	// Records is, per partitioned bucket (calls, runs, batches), its keys summed over the
	// partitions and each partition's (Stores has each partition's bucket by name too).
	Records map[string]partitionedKeys `json:"records"`
}

// partitionedKeys is one partitioned bucket's keys at a sample: the sum over the
// partitions, and each partition's, partition 0 first.
type partitionedKeys struct {
	Keys         uint64   `json:"keys"`
	PerPartition []uint64 `json:"per_partition"`
}

// partitionedBuckets are the buckets that exist once per partition, by the short name the
// samples use.
func partitionedBuckets(n contracts.Names) map[string]string {
	return map[string]string{"calls": n.CallsBucket(), "runs": n.RunsBucket(), "batches": n.BatchesBucket()}
}

// recordKeys sums each partitioned bucket's keys over every partition of names.
func recordKeys(stores map[string]store, names contracts.Names) map[string]partitionedKeys {
	out := map[string]partitionedKeys{}
	for _, pn := range names.EachPartition() {
		for short, bucket := range partitionedBuckets(pn) {
			r := out[short]
			k := stores["KV_"+bucket].Keys
			r.Keys += k
			r.PerPartition = append(r.PerPartition, k)
			out[short] = r
		}
	}
	return out
}

func takeSample(ctx context.Context, d *dialed, dataDir string, dev *devProcess, t time.Duration, l *load, p *probe) sample {
	s := sample{T: t.Seconds(), Calls: l.calls.Load(), Batches: l.batches.Load(), Errors: l.errors.Load(),
		memory: dev.memory(), Probe: p.take(), Stores: map[string]store{}}
	for name, bytes := range diskPerStream(dataDir) {
		st := s.Stores[name]
		st.Bytes = bytes
		s.Stores[name] = st
		s.Disk += bytes
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lister := d.js.ListStreams(ictx)
	for info := range lister.Info() {
		st := s.Stores[info.Config.Name]
		st.Msgs, st.Keys = info.State.Msgs, info.State.NumSubjects
		s.Stores[info.Config.Name] = st
	}
	s.Records = recordKeys(s.Stores, d.names)
	return s
}

// plateauSlack is the growth below which a store counts as level whatever its ratio.
const plateauSlack = 1 << 20

// diskPerStream sums the allocated size of each stream directory of the file store
// (jetstream/{account}/streams/{stream}).
func diskPerStream(dataDir string) map[string]int64 {
	out := map[string]int64{}
	accounts, _ := os.ReadDir(filepath.Join(dataDir, "jetstream"))
	for _, a := range accounts {
		streams := filepath.Join(dataDir, "jetstream", a.Name(), "streams")
		entries, _ := os.ReadDir(streams)
		for _, e := range entries {
			var n int64
			_ = filepath.WalkDir(filepath.Join(streams, e.Name()), func(_ string, de fs.DirEntry, err error) error {
				if err != nil || de.IsDir() {
					return nil
				}
				if fi, err := de.Info(); err == nil {
					if st, ok := fi.Sys().(*syscall.Stat_t); ok {
						n += st.Blocks * 512
					}
				}
				return nil
			})
			out[e.Name()] += n
		}
	}
	return out
}

func printSample(s sample) {
	fmt.Printf("t=%5.0fs calls=%7d errors=%d rss=%5.1fMiB (anon %5.1f) disk=%7.1fMB probe n=%d p50=%.1fms p99=%.1fms",
		s.T, s.Calls, s.Errors, s.RSSMiB, s.AnonMiB, float64(s.Disk)/1e6, s.Probe.N, s.Probe.P50Ms, s.Probe.P99Ms)
	for _, short := range []string{"calls", "runs", "batches"} {
		r, ok := s.Records[short]
		if !ok {
			continue
		}
		fmt.Printf(" %s=%dkeys", short, r.Keys)
		if len(r.PerPartition) > 1 {
			each := make([]string, len(r.PerPartition))
			for k, n := range r.PerPartition {
				each[k] = fmt.Sprint(n)
			}
			fmt.Printf("(%s)", strings.Join(each, "+"))
		}
	}
	if st, ok := s.Stores["KV_AWAKEN_limits"]; ok {
		fmt.Printf(" limits=%dkeys", st.Keys)
	}
	fmt.Println()
}

// summarize fills the summary's per-store figures and the start/end ratios from its
// samples.
func summarize(sum *summary) {
	if len(sum.Samples) == 0 {
		return
	}
	first, last := sum.Samples[0], sum.Samples[len(sum.Samples)-1]
	// The 50% mark: the first sample with at least half of the calls done.
	mid := last
	for _, s := range sum.Samples {
		if s.Calls*2 >= last.Calls {
			mid = s
			break
		}
	}
	sum.RSSStart, sum.RSSEnd = first.memory, last.memory
	for _, s := range sum.Samples {
		sum.RSSMax.RSSMiB = max(sum.RSSMax.RSSMiB, s.RSSMiB)
		sum.RSSMax.AnonMiB = max(sum.RSSMax.AnonMiB, s.AnonMiB)
		sum.RSSMax.FileMiB = max(sum.RSSMax.FileMiB, s.FileMiB)
	}
	// The last sample is taken after the load stopped; its probe window may be short,
	// so the end latency is the last full window's when there is one.
	sum.ProbeStart, sum.ProbeEnd = first.Probe, last.Probe
	if len(sum.Samples) > 1 && last.Probe.N < sum.Samples[len(sum.Samples)-2].Probe.N/2 {
		sum.ProbeEnd = sum.Samples[len(sum.Samples)-2].Probe
	}
	if sum.ProbeStart.P99Ms > 0 {
		sum.ProbeP99Ratio = sum.ProbeEnd.P99Ms / sum.ProbeStart.P99Ms
	}
	for name, end := range last.Stores {
		st := storeSummary{BytesMid: mid.Stores[name].Bytes, BytesEnd: end.Bytes, MsgsEnd: end.Msgs, KeysEnd: end.Keys}
		if last.Calls > 0 {
			st.BytesPerCall = float64(end.Bytes) / float64(last.Calls)
		}
		if last.Calls > mid.Calls {
			st.GrowthPerCall = float64(end.Bytes-st.BytesMid) / float64(last.Calls-mid.Calls)
		}
		if st.BytesMid > 0 {
			st.EndOverMid = float64(end.Bytes) / float64(st.BytesMid)
		}
		// A store of a few blocks grows by a whole block at a time: under plateauSlack
		// it counts as level.
		st.Plateaued = float64(end.Bytes) <= 1.2*float64(st.BytesMid) || end.Bytes-st.BytesMid < plateauSlack
		sum.Stores[name] = st
	}
}

// staleKeys lists the keys of every bucket (each partition's of the partitioned ones) and
// counts those of runs finished (run id → when) more than olderThan ago, by bucket stream.
func staleKeys(ctx context.Context, js jetstream.JetStream, names contracts.Names, finished map[string]time.Time, olderThan time.Duration) (map[string]int, error) {
	now := time.Now()
	out := map[string]int{}
	var buckets []string
	for _, pn := range names.EachPartition() {
		buckets = append(buckets, pn.CallsBucket(), pn.RunsBucket(), pn.BatchesBucket())
	}
	buckets = append(buckets, names.TicketsBucket(), names.LimitsBucket())
	for _, bucket := range buckets {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		kv, err := js.KeyValue(lctx, bucket)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("bucket %s: %w", bucket, err)
		}
		keys, err := kv.ListKeys(lctx)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("keys of %s: %w", bucket, err)
		}
		n := 0
		for k := range keys.Keys() {
			for _, run := range runsOfKey(bucket == names.LimitsBucket(), k) {
				if at, ok := finished[run]; ok && now.Sub(at) > olderThan {
					n++
					break
				}
			}
		}
		cancel()
		out["KV_"+bucket] = n
	}
	return out, nil
}

// runsOfKey returns the tokens of key of bucket that may be a run id: every token of a
// record's key (each key of the soak's runs has the run id as one of its tokens), and the
// run of a limits ledger key's value (encoded in the key: a run id, or {run id}/{step}
// for a limit keyed by step).
func runsOfKey(limits bool, key string) []string {
	if !limits {
		return strings.Split(key, ".")
	}
	_, value, _, err := contracts.ParseLimitLedgerKey(key)
	if err != nil {
		return nil
	}
	if i := strings.LastIndexByte(value, '/'); i > 0 {
		return []string{value, value[:i]}
	}
	return []string{value}
}

func printSummary(sum *summary) {
	fmt.Printf("\nawaken soak — %s, %s, %d CPUs, load average %s; %d calls (%d batches, %d errors) in %.0fs (%.0f calls/s), %d workers, retention.default %s\n\n",
		sum.Time, sum.GoVersion, sum.CPUs, sum.Load, sum.Calls, sum.Batches, sum.Errors, sum.LoadS, sum.CallsPerS,
		sum.Settings.Workers, sum.Settings.Retention)
	fmt.Printf("%-22s %12s %12s %8s %10s %10s %10s %9s %6s\n", "store", "disk at 50%", "disk at end", "end/mid", "B/call", "msgs", "subjects", "plateau", "stale")
	names := make([]string, 0, len(sum.Stores))
	for n := range sum.Stores {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := sum.Stores[n]
		stale := "-"
		if v, ok := sum.StaleKeys[n]; ok {
			stale = fmt.Sprint(v)
		}
		fmt.Printf("%-22s %12d %12d %8.2f %10.0f %10d %10d %9v %6s\n", n, st.BytesMid, st.BytesEnd, st.EndOverMid,
			st.BytesPerCall, st.MsgsEnd, st.KeysEnd, st.Plateaued, stale)
	}
	fmt.Printf("\nRSS (anon: Go runtime memory): empty %.0f (%.0f) MiB, first sample %.0f (%.0f), end %.0f (%.0f), max %.0f (%.0f); soft limit %.0f MiB\n",
		sum.RSSEmpty.RSSMiB, sum.RSSEmpty.AnonMiB, sum.RSSStart.RSSMiB, sum.RSSStart.AnonMiB, sum.RSSEnd.RSSMiB, sum.RSSEnd.AnonMiB,
		sum.RSSMax.RSSMiB, sum.RSSMax.AnonMiB, sum.SoftLimitM)
	fmt.Printf("probe: start p50 %.1f ms p99 %.1f ms; end p50 %.1f ms p99 %.1f ms; p99 end/start %.2f\n",
		sum.ProbeStart.P50Ms, sum.ProbeStart.P99Ms, sum.ProbeEnd.P50Ms, sum.ProbeEnd.P99Ms, sum.ProbeP99Ratio)
	fmt.Printf("log during the load: %d warnings, %d errors\n", sum.LogWarnings, sum.LogErrors)
	if r := sum.Restart; r != nil {
		fmt.Printf("restart: stop %.1fs, ready %.1fs, RSS %.0f (anon %.0f) MiB at ready, %.0f (%.0f) MiB at end; probe n=%d p50 %.1f ms p99 %.1f ms max %.1f ms; log %d warnings, %d errors\n",
			r.StopS, r.ReadyS, r.RSSReady.RSSMiB, r.RSSReady.AnonMiB, r.RSSEnd.RSSMiB, r.RSSEnd.AnonMiB, r.Probe.N, r.Probe.P50Ms, r.Probe.P99Ms, r.Probe.MaxMs, r.LogWarnings, r.LogErrors)
	}
}
