package execcore

import (
	"context"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// Invocation is one attempt of one call as an [Invoker] sees it. It is the public
// [tool.Invocation] itself (an alias, not a copy): the executor core builds it, and tool
// bodies read the very same value with tool.InvocationFrom.
type Invocation = tool.Invocation

// Invoker runs the body of one tool call. The executor core calls it with a context that
// carries the invocation (see [tool.InvocationFrom]) and ends at the tool's timeout or when the
// executor shuts down; a body must honour it.
//
// Return a *contracts.ToolError to choose the error the model sees; return
// [contracts.UnavailableBeforeDispatch] only with proof that the effect did not start (the
// core then retries locally). Any other error becomes an execution error. The returned
// output's call id and normalisation are taken care of by the core. An Invoker is called
// concurrently from several workers and must be safe for that.
type Invoker interface {
	Invoke(ctx context.Context, inv Invocation) (contracts.ToolOutput, error)
}

// InvokerFunc adapts a function to [Invoker].
type InvokerFunc func(ctx context.Context, inv Invocation) (contracts.ToolOutput, error)

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, inv Invocation) (contracts.ToolOutput, error) {
	return f(ctx, inv)
}
