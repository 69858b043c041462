package x

import "context"

type env struct {
	Faults func(context.Context, string) error
}

func (e *env) Fault(ctx context.Context, op string) error { return nil }

func handle(ctx context.Context, e *env) error {
	if err := e.Fault(ctx, "op"); err != nil {
		return err
	}
	return e.Faults(ctx, "op")
}
