// Package toolctx carries the executor's hooks into a running tool body: the body-start
// hook (the body-run ledger), the progress reporter and the cost reporter. They travel in the body's context
// rather than in a public type so that the public vocabulary (pkg/executor/tool) can call
// them while only the executor core can install them: a package outside this module
// cannot import an internal package, so no tool author can fake a body start or a
// progress sink.
//
// It imports nothing of the module, so pkg/executor/tool stays a leaf.
package toolctx

import "context"

type bodyStartKey struct{}

type progressKey struct{}

// BodyStartFunc records that the body of the invocation running under ctx is about to
// start; an error means the start could not be recorded and the body must not run.
type BodyStartFunc func(ctx context.Context) error

// ProgressFunc receives one progress report of the body running under ctx. It must not
// block.
type ProgressFunc func(progress, total float64, message string)

// WithBodyStart returns ctx carrying the body-start hook f.
func WithBodyStart(ctx context.Context, f BodyStartFunc) context.Context {
	return context.WithValue(ctx, bodyStartKey{}, f)
}

// BodyStart returns the body-start hook ctx carries, nil when it carries none.
func BodyStart(ctx context.Context) BodyStartFunc {
	f, _ := ctx.Value(bodyStartKey{}).(BodyStartFunc)
	return f
}

// WithProgress returns ctx carrying the progress reporter f.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// Progress returns the progress reporter ctx carries, nil when it carries none.
func Progress(ctx context.Context) ProgressFunc {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}

type costKey struct{}

// CostFunc receives the cost the body running under ctx reports for its call.
type CostFunc func(amount float64)

// WithCost returns ctx carrying the cost reporter f.
func WithCost(ctx context.Context, f CostFunc) context.Context {
	return context.WithValue(ctx, costKey{}, f)
}

// Cost returns the cost reporter ctx carries, nil when it carries none.
func Cost(ctx context.Context) CostFunc {
	f, _ := ctx.Value(costKey{}).(CostFunc)
	return f
}
