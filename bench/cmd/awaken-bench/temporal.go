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
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/temporaltest"

	"github.com/awaken-dev/awaken/bench/internal/temporalite"
)

const temporalQueue = "awaken-bench"

// EchoActivity is the echo tool as a Temporal activity.
func EchoActivity(_ context.Context, text string) (string, error) { return text, nil }

// BatchWorkflow runs the calls of one batch as activities, in order, and returns their
// ordered results: the Temporal equivalent of a sequential awaken batch.
func BatchWorkflow(ctx workflow.Context, texts []string) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	out := make([]string, len(texts))
	for i, t := range texts {
		if err := workflow.ExecuteActivity(ctx, EchoActivity, t).Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type temporalRow struct {
	c      client.Client
	w      worker.Worker
	stopFn func()
}

func quietSDKLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError})))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// newTemporal starts an in-process Temporal server: with memory=true exactly
// temporaltest.NewServer (in-memory SQLite), otherwise the same lite server on SQLite in a
// file (the durability of the other rows).
func newTemporal(ctx context.Context, memory bool) (target, error) {
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
		ns := fmt.Sprintf("bench-%d", rand.Intn(1e6))
		s, err := temporalite.NewLiteServer(&temporalite.LiteServerConfig{
			Namespaces:       []string{ns},
			DatabaseFilePath: filepath.Join(dir, "temporal.db"),
			Logger:           log.NewNoopLogger(),
			FrontendIP:       "127.0.0.1",
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
	w := worker.New(c, temporalQueue, worker.Options{})
	w.RegisterWorkflow(BatchWorkflow)
	w.RegisterActivity(EchoActivity)
	if err := w.Start(); err != nil {
		stop()
		return nil, err
	}
	return &temporalRow{c: c, w: w, stopFn: stop}, nil
}

func (t *temporalRow) run(ctx context.Context, runID string, step int64, n int) ([]string, error) {
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("x%d", i)
	}
	wr, err := t.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: fmt.Sprintf("%s.%d", runID, step), TaskQueue: temporalQueue,
	}, BatchWorkflow, texts)
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
