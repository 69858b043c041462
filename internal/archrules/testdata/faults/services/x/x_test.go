package x

import "context"

func hit(ctx context.Context, e *env) error { return e.Fault(ctx, "op") }
