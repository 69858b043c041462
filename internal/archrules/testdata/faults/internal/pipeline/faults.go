package pipeline

import "context"

type Env struct {
	Faults func(context.Context, string) error
}

func (e *Env) step(ctx context.Context, op string) error { return e.Faults(ctx, op) }
