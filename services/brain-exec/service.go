// Package brainexec is the brain-exec service as awaken deploys it: the Brain executor of
// internal/brainexec over the example tools (internal/brainexec/builtin), or over a
// platform's own registry with or without them. Its MCP servers, recovery and catalog are
// the executor's; see internal/brainexec.
package brainexec

import (
	"context"

	"github.com/awaken-dev/awaken/internal/brainexec"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/toolreg"
)

// Start starts brain-exec on reg with the example tools added when builtins is set; a nil
// reg is a registry of the example tools alone.
func Start(ctx context.Context, env *pipeline.Env, reg *toolreg.Registry, builtins bool, opts ...execcore.Option) (*brainexec.Service, error) {
	reg, err := brainexec.Registry(ctx, env, reg, builtins)
	if err != nil {
		return nil, err
	}
	return brainexec.Start(ctx, env, reg, opts...)
}
