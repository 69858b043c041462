//go:build temporal

package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/temporaltest"

	"github.com/awaken-dev/awaken/bench/internal/temporalite"
)

const temporalQueue = "awaken-bench"

// temporalQueuePollRPS lifts history's per-shard task-queue reader rate (default 20 reads
// a second, so up to 50 ms between an activity's completion and the workflow task it
// schedules, on the lite server's single shard).
const temporalQueuePollRPS = 1000

// EchoActivity is the echo tool as a Temporal activity.
func EchoActivity(_ context.Context, text string) (string, error) { return text, nil }

var activityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
}

// BatchWorkflow runs the calls of one batch as activities, in order, and returns their
// ordered results: the Temporal equivalent of a sequential awaken batch.
func BatchWorkflow(ctx workflow.Context, texts []string) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	out := make([]string, len(texts))
	for i, t := range texts {
		if err := workflow.ExecuteActivity(ctx, EchoActivity, t).Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LocalBatchWorkflow is BatchWorkflow with local activities: the worker runs each call
// inside the workflow task and records only its result (one marker per call), with no
// activity task of the server's. What it gives up: a local activity whose worker crashes
// before the workflow task completes runs again (its start was never recorded), and it
// cannot be routed to another worker or task queue.
func LocalBatchWorkflow(ctx workflow.Context, texts []string) ([]string, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	out := make([]string, len(texts))
	for i, t := range texts {
		if err := workflow.ExecuteLocalActivity(ctx, EchoActivity, t).Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type temporalRow struct {
	c      client.Client
	w      worker.Worker
	local  bool
	stopFn func()
}

func quietSDKLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError})))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// temporalTuning is every setting the Temporal rows change from the defaults, with the
// source that recommends it; it goes into the results JSON.
func temporalTuning(lvl level, local bool) []string {
	t := []string{
		"server dynamic config matching.numTaskqueueReadPartitions=1 and matching.numTaskqueueWritePartitions=1 (default 4: forwarding between partitions is rate-limited and cost about 100 ms per activity here; go.temporal.io/server common/dynamicconfig/constants.go)",
		"server dynamic config system.enableActivityEagerExecution=true (default false in v1.30.4) with the worker's eager activities on (worker.Options.DisableEagerActivities=false): the activity task comes back in the workflow task's completion response (docs.temporal.io/develop/worker-performance, sdk-go worker.Options)",
		"eager workflow start: StartWorkflowOptions.EnableEagerStart=true with the worker in the starter's process (system.enableEagerWorkflowStart, default true); saves the Matching round trip of the first workflow task (docs.temporal.io/design-patterns/eager-workflow-start)",
		"poller autoscaling for workflow and activity pollers (initial 8, min 2, max 64 — the throughput phase's 64 concurrent runs), the recommended approach of docs.temporal.io/develop/worker-performance/configuration",
		"server dynamic config history.transferProcessorMaxPollRPS=1000 and history.visibilityProcessorMaxPollRPS=1000 (default 20 per shard: with the lite server's one shard, up to 50 ms between an activity's completion and the next workflow task; measured 50 ms per activity before this)",
		"one history shard, SQLite in a file, sticky execution on (the SDK default)",
	}
	switch lvl {
	case levelSynced:
		t = append(t, "SQLite PRAGMA synchronous=FULL: every commit fsyncs (the same promise as JetStream's sync always)")
	case levelRelaxed:
		t = append(t, "SQLite PRAGMA synchronous=OFF: commits reach the OS, not the disk (the same promise as JetStream's lazy sync)")
	}
	if local {
		t = append(t, "local activities (docs.temporal.io/design-patterns/performance-latency-patterns): a call runs inside the workflow task, no activity task; gives up: a call whose worker crashes before the workflow task completes runs again, and calls cannot go to another worker")
	}
	return t
}

// newTemporal starts an in-process Temporal server: with memory=true exactly
// temporaltest.NewServer (in-memory SQLite, untuned), otherwise the lite server on SQLite
// in a file with the tuning of temporalTuning at durability level lvl.
func newTemporal(ctx context.Context, memory bool, lvl level, local bool) (target, error) {
	var c client.Client
	var stop func()
	if memory {
		ts := temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quietSDKLogger()}))
		c, stop = ts.GetDefaultClient(), ts.Stop
	} else {
		dir, err := os.MkdirTemp("", "awaken-bench-temporal-")
		if err != nil {
			return nil, err
		}
		synchronous := "FULL"
		if lvl == levelRelaxed {
			synchronous = "OFF"
		}
		ns := fmt.Sprintf("bench-%d", rand.Intn(1e6))
		s, err := temporalite.NewLiteServer(&temporalite.LiteServerConfig{
			Namespaces:       []string{ns},
			DatabaseFilePath: filepath.Join(dir, "temporal.db"),
			Logger:           log.NewNoopLogger(),
			FrontendIP:       "127.0.0.1",
			SQLitePragmas:    map[string]string{"synchronous": synchronous},
			DynamicConfig: dynamicconfig.StaticClient{
				dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
				dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
				dynamicconfig.EnableActivityEagerExecution.Key():        true,
				dynamicconfig.EnableEagerWorkflowStart.Key():            true,
				dynamicconfig.TransferProcessorMaxPollRPS.Key():         temporalQueuePollRPS,
				dynamicconfig.VisibilityProcessorMaxPollRPS.Key():       temporalQueuePollRPS,
			},
		})
		if err != nil {
			return nil, err
		}
		if err := s.Start(); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err = s.NewClientWithOptions(cctx, client.Options{Namespace: ns, Logger: quietSDKLogger()})
		if err != nil {
			_ = s.Stop()
			return nil, err
		}
		stop = func() { c.Close(); _ = s.Stop(); _ = os.RemoveAll(dir) }
	}
	opts := worker.Options{}
	if !memory {
		pollers := worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: 8, MinimumNumberOfPollers: 2, MaximumNumberOfPollers: throughputRuns,
		})
		opts.WorkflowTaskPollerBehavior, opts.ActivityTaskPollerBehavior = pollers, pollers
	}
	w := worker.New(c, temporalQueue, opts)
	w.RegisterWorkflow(BatchWorkflow)
	w.RegisterWorkflow(LocalBatchWorkflow)
	w.RegisterActivity(EchoActivity)
	if err := w.Start(); err != nil {
		stop()
		return nil, err
	}
	return &temporalRow{c: c, w: w, local: local, stopFn: stop}, nil
}

func (t *temporalRow) run(ctx context.Context, runID string, step int64, n int) ([]string, error) {
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("x%d", i)
	}
	wf := any(BatchWorkflow)
	if t.local {
		wf = LocalBatchWorkflow
	}
	wr, err := t.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: fmt.Sprintf("%s.%d", runID, step), TaskQueue: temporalQueue, EnableEagerStart: true,
	}, wf, texts)
	if err != nil {
		return nil, err
	}
	var out []string
	if err := wr.Get(ctx, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (t *temporalRow) close() {
	t.w.Stop()
	t.stopFn()
}
