package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// embedded starts the JetStream server every NATS row uses: file storage in a fresh
// temporary directory, the options of `awaken dev` (natsserver.StartEmbedded).
func embedded(name string) (*server.Server, func(), error) {
	dir, err := os.MkdirTemp("", "awaken-bench-"+name+"-")
	if err != nil {
		return nil, nil, err
	}
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: dir, Port: -1, ServerName: "bench-" + name, NoLog: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return srv, func() { natsserver.Shutdown(srv); _ = os.RemoveAll(dir) }, nil
}

// pipeline is the real thing: the five services on an embedded server, driven through the
// public client, exactly as `awaken dev` runs them.
type pipeline struct {
	stack  *app.Stack
	client *client.Client
	stop   func()
}

func newPipeline(ctx context.Context, s settings) (*pipeline, error) {
	cfg, err := config.Load(s.Config)
	if err != nil {
		return nil, err
	}
	if cfg.Storage.Memory {
		return nil, fmt.Errorf("%s: storage.memory is set; the benchmark compares file storage", s.Config)
	}
	// The process is what `awaken dev` is: one server and every service, under the same
	// soft memory limit.
	app.LimitDevMemory()
	srv, stop, err := embedded("pipeline")
	if err != nil {
		return nil, err
	}
	st, err := app.Start(ctx, app.Options{
		Config: cfg,
		Dial:   app.InProcessDialer(srv),
		// The production log level (info), written nowhere: its formatting cost counts.
		Log: app.NewLogger(io.Discard, "info"),
	})
	if err != nil {
		stop()
		return nil, err
	}
	nc, err := app.InProcessDialer(srv)("bench-client")
	if err != nil {
		stop()
		return nil, err
	}
	c, err := client.New(nc)
	if err != nil {
		stop()
		return nil, err
	}
	return &pipeline{stack: st, client: c, stop: stop}, nil
}

func echoCalls(n int) []contracts.ToolCall {
	calls := make([]contracts.ToolCall, n)
	for i := range calls {
		args, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("x%d", i)})
		calls[i] = contracts.ToolCall{CallID: fmt.Sprintf("c%d", i), ToolID: "echo", Arguments: args}
	}
	return calls
}

func (p *pipeline) run(ctx context.Context, runID string, step int64, n int) ([]string, error) {
	res, err := p.client.SubmitAndWait(ctx, contracts.BatchSubmission{
		RunID: runID, ThreadID: "thread-" + runID, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Calls: echoCalls(n),
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(res.Results))
	for i, r := range res.Results {
		out[i] = r.Output.Text()
	}
	return out, nil
}

func (p *pipeline) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = p.stack.Stop(ctx)
	_ = p.client.Close()
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
