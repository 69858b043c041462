//go:build unix

package mcpbridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/wiring/app"
)

// startPipeline starts the services opts names ([startStack]) with in-memory storage and
// the configuration configYAML formats with args (as fmt.Appendf), under a context that
// gives the test two minutes; it returns that context and the stack.
func startPipeline(t *testing.T, opts app.Options, configYAML string, args ...any) (context.Context, testStack) {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf([]byte("storage: {memory: true}\n"), configYAML, args...))
	if err != nil {
		t.Fatal(err)
	}
	opts.Config = cfg
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, startStack(ctx, t, opts)
}
