package brainexec

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// publishTimeout bounds the catalog publish at start (listing MCP tools included).
const publishTimeout = 10 * time.Second

// publishDescriptors writes the descriptors of every tool reg serves now (typed tools with
// the schema derived from their argument type, and the current tools of the MCP servers)
// to the tools bucket under the brain key, where the api builds the catalog from. Only
// the brain-exec NATS user may write that key. A failure is logged, never fatal: the
// executor serves calls without it, and the catalog then lacks those schemas.
func publishDescriptors(ctx context.Context, env *pipeline.Env, reg *toolreg.Registry) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if err := putDescriptors(ctx, env, reg.DescriptorsContext(ctx)); err != nil {
		env.Log.Warn().Err(err).Msg("tool descriptors not published; the tool catalog lacks the brain tools' schemas")
	}
}

func putDescriptors(ctx context.Context, env *pipeline.Env, descs []contracts.ToolDescriptor) error {
	if descs == nil {
		descs = []contracts.ToolDescriptor{}
	}
	data, err := json.Marshal(descs)
	if err != nil {
		return fmt.Errorf("encode descriptors: %w", err)
	}
	kv, err := env.JS.KeyValue(ctx, env.Names.ToolsBucket())
	if err != nil {
		return fmt.Errorf("tools bucket: %w", err)
	}
	if _, err := kv.Put(ctx, contracts.ToolDescriptorsKey(contracts.TargetBrain), data); err != nil {
		return fmt.Errorf("put descriptors: %w", err)
	}
	return nil
}
