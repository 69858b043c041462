// Command awaken-soak runs `awaken dev` under sustained load for a number of calls or a
// time, with a short retention, and measures whether it stays bounded: every interval it
// samples the calls done, each store's bytes on disk, messages and keys, the process's
// RSS and the latency of probe batches; at the end it checks that no bucket holds a key
// of a run finished more than two retention periods ago, optionally restarts `awaken dev`
// on the same store and probes it again, prints a table and writes
// results/soak-{timestamp}.json (docs/benchmarks.md, "Soak").
//
// The load is distinct runs of one batch each, 1- and 10-call `echo` batches in turn,
// submitted by N workers through the public client; the probe is a 1-call batch of a new
// run every probe interval, timed alone. Everything runs on the loopback.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// settings are the soak's parameters, recorded in its summary.
type settings struct {
	Calls        int64         `json:"calls"`
	Duration     time.Duration `json:"-"`
	DurationS    float64       `json:"max_seconds"`
	Retention    time.Duration `json:"-"`
	RetentionS   float64       `json:"retention_default_seconds"`
	Workers      int           `json:"workers"`
	Interval     time.Duration `json:"-"`
	IntervalS    float64       `json:"sample_seconds"`
	ProbeEvery   time.Duration `json:"-"`
	ProbeEveryMs float64       `json:"probe_every_ms"`
	Restart      time.Duration `json:"-"`
	RestartS     float64       `json:"restart_probe_seconds"`
	Sync         string        `json:"sync"`
	Config       string        `json:"config"`
}

func main() {
	var s settings
	bin := flag.String("awaken", "../bin/awaken", "the awaken binary (make build)")
	out := flag.String("out", "results", "directory of the JSON summary")
	keep := flag.Bool("keep", false, "keep the data directory and the dev log (printed at the end)")
	flag.Int64Var(&s.Calls, "calls", 100_000, "calls to run (0: until -duration)")
	flag.DurationVar(&s.Duration, "duration", 30*time.Minute, "longest load phase")
	flag.DurationVar(&s.Retention, "retention", 2*time.Minute, "retention.default of the generated configuration")
	flag.IntVar(&s.Workers, "workers", 16, "concurrent submitters")
	flag.DurationVar(&s.Interval, "interval", 10*time.Second, "sampling interval")
	flag.DurationVar(&s.ProbeEvery, "probe-every", 250*time.Millisecond, "interval between probe batches")
	flag.DurationVar(&s.Restart, "restart", 40*time.Second, "after the load, restart awaken dev on the same store and probe it this long (0: no restart)")
	flag.StringVar(&s.Sync, "sync", "always", "awaken dev --sync")
	flag.StringVar(&s.Config, "config", "../examples/awaken.yaml", "host configuration the soak's is made from (a retention section is added)")
	flag.Parse()
	s.DurationS, s.RetentionS, s.IntervalS = s.Duration.Seconds(), s.Retention.Seconds(), s.Interval.Seconds()
	s.ProbeEveryMs, s.RestartS = float64(s.ProbeEvery.Milliseconds()), s.Restart.Seconds()
	if s.Calls <= 0 && s.Duration <= 0 {
		fmt.Fprintln(os.Stderr, "awaken-soak: -calls or -duration must bound the load")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := soak(ctx, s, *bin, *out, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "awaken-soak:", err)
		os.Exit(1)
	}
}

// summary is the JSON document written under results/.
type summary struct {
	Time      string   `json:"time"`
	GoVersion string   `json:"go_version"`
	CPUs      int      `json:"cpus"`
	Load      string   `json:"load_average_at_end"`
	Settings  settings `json:"settings"`
	// Calls and Batches are what completed; Errors the batches that failed.
	Calls      int64   `json:"calls"`
	Batches    int64   `json:"batches"`
	Errors     int64   `json:"errors"`
	LoadS      float64 `json:"load_seconds"`
	CallsPerS  float64 `json:"calls_per_s"`
	SoftLimitM float64 `json:"soft_limit_mib"`
	// Memory of awaken dev: right after its start on the empty store, at the first
	// sample under load, at the end of the load and the highest sample of each figure.
	RSSEmpty memory `json:"rss_empty"`
	RSSStart memory `json:"rss_start"`
	RSSEnd   memory `json:"rss_end"`
	RSSMax   memory `json:"rss_max"`
	// Probe latency of the first and last sample of the load, and their ratio.
	ProbeStart    latency `json:"probe_start"`
	ProbeEnd      latency `json:"probe_end"`
	ProbeP99Ratio float64 `json:"probe_p99_end_over_start"`
	// Stores: per store, its size at the 50% mark and at the end, and bytes per call.
	Stores map[string]storeSummary `json:"stores"`
	// StaleKeys counts, per bucket, keys of runs that finished more than two retention
	// periods before the check (the goal: none).
	StaleKeys map[string]int `json:"stale_keys"`
	Restart   *restartPhase  `json:"restart,omitempty"`
	Samples   []sample       `json:"samples"`
	// LogWarnings and LogErrors count awaken dev's warning and error lines during the load.
	LogWarnings int      `json:"log_warnings"`
	LogErrors   int      `json:"log_errors"`
	LastLogs    []string `json:"last_warning_lines,omitempty"`
}

type storeSummary struct {
	BytesMid      int64   `json:"bytes_at_50pct"`
	BytesEnd      int64   `json:"bytes_at_end"`
	MsgsEnd       uint64  `json:"messages_at_end"`
	KeysEnd       uint64  `json:"subjects_at_end"`
	BytesPerCall  float64 `json:"bytes_per_call"` // at the end over every call of the load
	GrowthPerCall float64 `json:"second_half_bytes_per_call"`
	EndOverMid    float64 `json:"end_over_mid"`
	Plateaued     bool    `json:"plateaued"` // end within 1.2× of the 50% mark
}

// restartPhase is what a restart on the soak's store measured.
type restartPhase struct {
	StopS       float64  `json:"stop_seconds"`
	ReadyS      float64  `json:"ready_seconds"`
	RSSReady    memory   `json:"rss_ready"`
	RSSEnd      memory   `json:"rss_end"`
	Probe       latency  `json:"probe"`
	Samples     []sample `json:"samples"`
	LogWarnings int      `json:"log_warnings"`
	LogErrors   int      `json:"log_errors"`
	LastLogs    []string `json:"last_warning_lines,omitempty"`
}

func soak(ctx context.Context, s settings, bin, outDir string, keep bool) error {
	tmp, err := os.MkdirTemp("", "awaken-soak-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(tmp)
	}
	cfgPath, err := soakConfig(s.Config, tmp, s.Retention.String())
	if err != nil {
		return err
	}
	dataDir, logPath := filepath.Join(tmp, "data"), filepath.Join(tmp, "dev.log")
	dev, err := startDev(bin, cfgPath, dataDir, logPath, s.Sync, 2*time.Minute)
	if err != nil {
		return err
	}
	defer func() { _ = dev.stop(time.Minute) }()
	sum := &summary{Settings: s, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), SoftLimitM: 160,
		Stores: map[string]storeSummary{}}
	sum.RSSEmpty = dev.memory()
	fmt.Fprintf(os.Stderr, "awaken dev ready at %s (data %s, RSS %.0f MiB)\n", dev.url, dataDir, sum.RSSEmpty.RSSMiB)

	d, err := dial(dev.url)
	if err != nil {
		return err
	}
	// Run ids carry the soak's start, so a later soak on a kept store never repeats one.
	token := fmt.Sprint(time.Now().Unix())
	l := newLoad(d.client, token)
	pr := newProbe(d.client, token)
	loadCtx, endLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range s.Workers {
		wg.Add(1)
		go func() { defer wg.Done(); l.work(loadCtx, w, s.Calls) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); pr.run(loadCtx, s.ProbeEvery) }()

	start := time.Now()
	tick := time.NewTicker(s.Interval)
	deadline := time.NewTimer(s.Duration)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-deadline.C:
			done = true
		case <-l.reached:
			done = true
		case <-tick.C:
			sm := takeSample(ctx, d, dataDir, dev, time.Since(start), l, pr)
			sum.Samples = append(sum.Samples, sm)
			printSample(sm)
		}
	}
	tick.Stop()
	endLoad()
	wg.Wait()
	sm := takeSample(context.Background(), d, dataDir, dev, time.Since(start), l, pr)
	sum.Samples = append(sum.Samples, sm)
	printSample(sm)
	sum.LoadS = time.Since(start).Seconds()
	sum.Calls, sum.Batches, sum.Errors = l.calls.Load(), l.batches.Load(), l.errors.Load()
	sum.CallsPerS = float64(sum.Calls) / sum.LoadS
	summarize(sum)
	l.mu.Lock()
	finished := l.finished
	l.mu.Unlock()
	sum.StaleKeys, err = staleKeys(context.Background(), d.js, d.names, finished, 2*s.Retention)
	if err != nil {
		return err
	}
	sum.LogWarnings, sum.LogErrors, sum.LastLogs = dev.logs.counts()
	d.close()

	if s.Restart > 0 && ctx.Err() == nil {
		sum.Restart, err = restart(ctx, s, bin, cfgPath, dataDir, logPath, &dev, token)
		if err != nil {
			return err
		}
	}
	sum.Time, sum.Load = time.Now().UTC().Format(time.RFC3339), loadAverage()
	printSummary(sum)
	if keep {
		fmt.Printf("kept: data %s, log %s\n", dataDir, logPath)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	name := filepath.Join(outDir, "soak-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return err
	}
	fmt.Printf("written: %s\n", name)
	return nil
}

// restart stops awaken dev, starts it again on the same store and probes it for
// s.Restart, sampling as during the load (no load meanwhile).
func restart(ctx context.Context, s settings, bin, cfgPath, dataDir, logPath string, dev **devProcess, token string) (*restartPhase, error) {
	r := &restartPhase{}
	t0 := time.Now()
	if err := (*dev).stop(2 * time.Minute); err != nil {
		return nil, err
	}
	r.StopS = time.Since(t0).Seconds()
	t0 = time.Now()
	next, err := startDev(bin, cfgPath, dataDir, logPath, s.Sync, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	*dev = next
	r.ReadyS = time.Since(t0).Seconds()
	r.RSSReady = next.memory()
	fmt.Fprintf(os.Stderr, "restarted: stop %.1fs, ready after %.1fs, RSS %.0f MiB\n", r.StopS, r.ReadyS, r.RSSReady.RSSMiB)
	d, err := dial(next.url)
	if err != nil {
		return nil, err
	}
	defer d.close()
	l := newLoad(d.client, token+"r") // no workers: sampling only counts the probe
	pr := newProbe(d.client, token+"r")
	pctx, cancel := context.WithTimeout(ctx, s.Restart)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); pr.run(pctx, s.ProbeEvery) }()
	start := time.Now()
	tick := time.NewTicker(min(s.Interval, s.Restart))
	defer tick.Stop()
	for pctx.Err() == nil {
		select {
		case <-pctx.Done():
		case <-tick.C:
			sm := takeSample(ctx, d, dataDir, next, time.Since(start), l, pr)
			r.Samples = append(r.Samples, sm)
			printSample(sm)
		}
	}
	<-done
	r.Probe = pr.total()
	r.RSSEnd = next.memory()
	r.LogWarnings, r.LogErrors, r.LastLogs = next.logs.counts()
	return r, nil
}

// load submits distinct runs: batch n is run {token}-{n}, step 1, of 1 call when n is
// even and 10 when odd.
type load struct {
	c       *client.Client
	token   string
	next    atomic.Int64
	calls   atomic.Int64
	batches atomic.Int64
	errors  atomic.Int64
	reached chan struct{}
	once    sync.Once

	mu       sync.Mutex
	finished map[string]time.Time // run id → when its results arrived
	lastErr  string
}

func newLoad(c *client.Client, token string) *load {
	return &load{c: c, token: token, reached: make(chan struct{}), finished: map[string]time.Time{}}
}

func runID(token string, n int64) string { return "soak-" + token + "-" + fmt.Sprint(n) }

func (l *load) work(ctx context.Context, _ int, target int64) {
	for ctx.Err() == nil {
		n := l.next.Add(1)
		size := 1
		if n%2 == 1 {
			size = 10
		}
		id := runID(l.token, n)
		if _, err := l.c.SubmitAndWait(ctx, submission(id, size)); err != nil {
			if ctx.Err() == nil {
				l.errors.Add(1)
				l.mu.Lock()
				l.lastErr = err.Error()
				l.mu.Unlock()
			}
			continue
		}
		l.mu.Lock()
		l.finished[id] = time.Now()
		l.mu.Unlock()
		l.batches.Add(1)
		if l.calls.Add(int64(size)) >= target && target > 0 {
			l.once.Do(func() { close(l.reached) })
		}
	}
}

func submission(runID string, n int) contracts.BatchSubmission {
	calls := make([]contracts.ToolCall, n)
	for i := range calls {
		calls[i] = contracts.ToolCall{CallID: fmt.Sprintf("c%d", i), ToolID: "echo",
			Arguments: json.RawMessage(fmt.Sprintf(`{"text":"x%d"}`, i))}
	}
	return contracts.BatchSubmission{RunID: runID, ThreadID: "thread-" + runID, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}}, Calls: calls}
}

// probe times a 1-call batch of a new run every interval, one at a time.
type probe struct {
	c     *client.Client
	token string
	n     int64

	mu     sync.Mutex
	window []time.Duration // since the last sample
	all    []time.Duration
	errors int
}

func newProbe(c *client.Client, token string) *probe { return &probe{c: c, token: token} }

func (p *probe) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.n++
		t0 := time.Now()
		_, err := p.c.SubmitAndWait(ctx, submission(runID("probe-"+p.token, p.n), 1))
		d := time.Since(t0)
		p.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				p.errors++
			}
		} else {
			p.window = append(p.window, d)
			p.all = append(p.all, d)
		}
		p.mu.Unlock()
	}
}

// take returns the latencies since the last call and starts a new window.
func (p *probe) take() latency {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := percentiles(p.window)
	p.window = nil
	return l
}

func (p *probe) total() latency {
	p.mu.Lock()
	defer p.mu.Unlock()
	return percentiles(append([]time.Duration(nil), p.all...))
}

// dialed is the soak's connection to awaken dev.
type dialed struct {
	nc     *nats.Conn
	client *client.Client
	js     jetstreamAPI
	// names are the deployment's, with its partition count (read once awaken dev is up).
	names contracts.Names
}

func dial(url string) (*dialed, error) {
	nc, err := nats.Connect(url, nats.Name("awaken-soak"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	c, err := client.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	js, err := newJetStream(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names, err := c.Names(ctx) // every partition's stores are sampled
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &dialed{nc: nc, client: c, js: js, names: names}, nil
}

func (d *dialed) close() {
	_ = d.client.Close()
	d.nc.Close()
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
