package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// embedded starts the JetStream server every NATS row uses: file storage in a fresh
// temporary directory, the options of `awaken dev` (natsserver.StartEmbedded) at durability
// level lvl: synced is `awaken dev --sync always`, relaxed `--sync lazy`.
func embedded(name string, lvl level) (*server.Server, func(), error) {
	dir, err := os.MkdirTemp("", "awaken-bench-"+name+"-")
	if err != nil {
		return nil, nil, err
	}
	sync := natsserver.SyncLazy
	if lvl == levelSynced {
		sync = natsserver.SyncAlways
	}
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: dir, Port: -1, ServerName: "bench-" + name, NoLog: true, Sync: sync})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return srv, func() { natsserver.Shutdown(srv); _ = os.RemoveAll(dir) }, nil
}

// pipeline is the real thing: the five services on an embedded server (or, for the
// cluster rows, on three clustered ones), driven through the public client, exactly as
// `awaken dev` runs them.
type pipeline struct {
	nats   *backend
	stack  *app.Stack
	extra  []*app.Stack // further brain-exec instances (the scale-out rows)
	client *client.Client
	stop   func()
	// tool is what run submits: "echo" (a sequential batch), "delegate" (a parallel
	// batch: a delegation tool with parallel completion), "slow" (50 ms of I/O) or
	// "lookup" (50 ms of I/O, declared parallel).
	tool string
}

// newPipeline starts the pipeline at durability level lvl, on one embedded server or (cluster)
// on a 3-node cluster with every stream and bucket R3, with brain-exec running as
// executors instances of brainWorkers workers each (0 keeps the configuration's), and
// partitions partitions (storage.partitions; 0 keeps the configuration's).
func newPipeline(ctx context.Context, s settings, lvl level, cluster bool, executors, brainWorkers, partitions int) (*pipeline, error) {
	cfg, err := config.Load(s.Config)
	if err != nil {
		return nil, err
	}
	if cfg.Storage.Memory {
		return nil, fmt.Errorf("%s: storage.memory is set; the benchmark compares file storage", s.Config)
	}
	if !cluster {
		// The process is what `awaken dev` is: one server and every service, under the
		// same soft memory limit. (The cluster rows hold three servers, which no
		// deployment runs in one process: no limit.)
		app.LimitDevMemory()
	}
	if brainWorkers > 0 {
		cfg.Executors.Brain.Workers = brainWorkers
	}
	if partitions > 0 {
		cfg.Storage.Partitions = partitions
	}
	b, err := newBackend("pipeline", lvl, cluster)
	if err != nil {
		return nil, err
	}
	// Every stream and bucket with the backend's replicas: storage.replicas, as `awaken
	// setup` applies it to a cluster (deploy/nats/cluster.conf).
	cfg.Storage.Replicas = b.replicas
	// The production log level (info), written nowhere: its formatting cost counts.
	logger := servicerun.NewLogger(io.Discard, "info")
	p := &pipeline{nats: b, tool: "echo", stop: b.stop}
	if p.stack, err = app.Start(ctx, app.Options{Config: cfg, Dial: b.dial, Log: logger}); err != nil {
		b.stop()
		return nil, err
	}
	for range executors - 1 {
		// Each instance has its own connection and consumer pull loop on the shared
		// durable consumer, as a separate `awaken brain-exec` process would.
		x, err := app.Start(ctx, app.Options{Config: cfg, Services: []string{contracts.ServiceBrainExec}, Dial: b.dial, Log: logger})
		if err != nil {
			p.close()
			return nil, err
		}
		p.extra = append(p.extra, x)
	}
	nc, err := b.dial("bench-client")
	if err != nil {
		p.close()
		return nil, err
	}
	if p.client, err = client.New(nc); err != nil {
		nc.Close()
		p.close()
		return nil, err
	}
	if cluster {
		// The streams and buckets were created a moment ago: wait until each has elected
		// its leader before the first batch is timed.
		js, err := jetstream.New(nc)
		if err == nil {
			err = waitAllStreamLeaders(ctx, js)
		}
		if err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// slowToolMS is the I/O time of one call of the scale-out rows.
const slowToolMS = 50

func echoCalls(n int) []contracts.ToolCall { return toolCalls("echo", n) }

// toolCalls are n calls of tool whose outputs, as the pipeline returns them, are x0…x{n-1}
// (echo), "delegated: x0"… (delegate), "done" (slow) or "looked up in 50 ms" (lookup).
func toolCalls(tool string, n int) []contracts.ToolCall {
	calls := make([]contracts.ToolCall, n)
	for i := range calls {
		a := map[string]any{"text": fmt.Sprintf("x%d", i)}
		switch tool {
		case "delegate":
			a = map[string]any{"task": fmt.Sprintf("x%d", i), "ms": 0}
		case "slow", "lookup":
			a = map[string]any{"ms": slowToolMS}
		}
		args, _ := json.Marshal(a)
		calls[i] = contracts.ToolCall{CallID: fmt.Sprintf("c%d", i), ToolID: tool, Arguments: args}
	}
	return calls
}

func (p *pipeline) run(ctx context.Context, runID string, step int64, n int) ([]string, error) {
	return p.runTool(ctx, p.tool, runID, step, n)
}

// runTool submits n calls of tool as one batch and returns the outputs normalised to
// x0…x{n-1} (delegate's prefix removed), or "done" for slow.
func (p *pipeline) runTool(ctx context.Context, tool, runID string, step int64, n int) ([]string, error) {
	res, err := p.client.SubmitAndWait(ctx, contracts.BatchSubmission{
		RunID: runID, ThreadID: "thread-" + runID, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{tool}},
		Calls: toolCalls(tool, n),
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(res.Results))
	for i, r := range res.Results {
		out[i] = strings.TrimPrefix(r.Output.Text(), "delegated: ")
	}
	return out, nil
}

func (p *pipeline) servers() []*server.Server { return p.nats.nodes }

func (p *pipeline) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, x := range p.extra {
		_ = x.Stop(ctx)
	}
	if p.stack != nil {
		_ = p.stack.Stop(ctx)
	}
	if p.client != nil {
		_ = p.client.Close()
	}
	p.stop()
}

// startProfiles starts the CPU profile of the pipeline row's throughput phase; the
// returned function stops it and writes the allocation profile.
func startProfiles(row string, s settings) (func() error, error) {
	if row != rowPipeline || (s.CPUProfile == "" && s.MemProfile == "") {
		return func() error { return nil }, nil
	}
	var cpu *os.File
	if s.CPUProfile != "" {
		f, err := os.Create(s.CPUProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		cpu = f
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return err
			}
		}
		if s.MemProfile != "" {
			f, err := os.Create(s.MemProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			return pprof.Lookup("allocs").WriteTo(f, 0)
		}
		return nil
	}, nil
}
