package batcher

import (
	"context"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Deps is what the batcher works with: the runtime and basics every service has, the
// batch book it records batches in, the publisher of its rejections and the notices it
// sends without storing them.
type Deps struct {
	pipeline.Runtime
	pipeline.Basics
	BatchBook
	pipeline.Notices
	// Pub publishes the rejection of a refused submission (stored: the platform reads it).
	Pub *bus.Publisher
}

// BatchBook records a batch — the run's claim and the batch record in one write — and
// reads one back.
type BatchBook interface {
	AcceptBatch(ctx context.Context, rec contracts.BatchRecord) (pipeline.AcceptResult, error)
	FreshBatch(ctx context.Context, runID string, step int64) (contracts.BatchRecord, error)
}

// DepsOf returns the batcher's dependencies from the environment.
func DepsOf(env *pipeline.Env) Deps {
	return Deps{Runtime: env, Basics: env.Basics(), BatchBook: env, Notices: env, Pub: env.Pub}
}
