package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// PublishedAnnotations is the view of the tool annotations brain-exec published with its
// descriptors (the brain key of the tools bucket), kept current by a KV watch. It is the
// [config.AnnotationSource] of a process whose configuration trusts some MCP server's
// annotations: the batcher pins from it, the gate decides from it, and every entry check
// validates against it. It is safe for concurrent use.
type PublishedAnnotations struct {
	mu     sync.RWMutex
	byTool map[string]contracts.ToolAnnotations
}

// WatchAnnotations starts the view and returns once it holds what the bucket holds now
// (empty when brain-exec has published nothing yet), or when ctx ends. The watch runs
// until life ends.
func WatchAnnotations(ctx, life context.Context, js jetstream.JetStream, names contracts.Names, log zerolog.Logger) (*PublishedAnnotations, error) {
	kv, err := js.KeyValue(ctx, names.ToolsBucket())
	if err != nil {
		return nil, fmt.Errorf("pipeline: tools bucket: %w", err)
	}
	w, err := kv.Watch(ctx, contracts.ToolDescriptorsKey(contracts.TargetBrain))
	if err != nil {
		return nil, fmt.Errorf("pipeline: watch tool descriptors: %w", err)
	}
	p := &PublishedAnnotations{byTool: map[string]contracts.ToolAnnotations{}}
	current := make(chan struct{})
	go state.Follow(life, w, func() { close(current) }, func(e jetstream.KeyValueEntry) { p.apply(e, log) })
	wait := time.NewTimer(annotationsFirstRead)
	defer wait.Stop()
	select {
	case <-current:
		return p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("pipeline: watch tool descriptors: %w", ctx.Err())
	case <-wait.C:
		// A watch the server refused (a missing grant) never delivers: say so instead of
		// hanging the start.
		return nil, fmt.Errorf("pipeline: watch tool descriptors: nothing read within %s (may this NATS user watch %s?)",
			annotationsFirstRead, names.ToolsBucket())
	}
}

// annotationsFirstRead bounds the wait for the current descriptors at start.
const annotationsFirstRead = 30 * time.Second

// apply replaces the view with the descriptors of entry (a delete empties it).
func (p *PublishedAnnotations) apply(e jetstream.KeyValueEntry, log zerolog.Logger) {
	next := map[string]contracts.ToolAnnotations{}
	if e.Operation() == jetstream.KeyValuePut {
		descs, err := bus.Decode[[]contracts.ToolDescriptor](e.Value())
		if err != nil {
			log.Error().Err(err).Msg("published tool descriptors refused: they do not decode strictly; no annotations are used")
		}
		for _, d := range descs {
			var a contracts.ToolAnnotations
			if d.Annotations != nil {
				a = *d.Annotations
			}
			next[d.ID] = a
		}
	}
	p.mu.Lock()
	p.byTool = next
	p.mu.Unlock()
}

// Annotations returns the annotations published for toolID; ok is false when no
// descriptor of it was published. A descriptor without annotations yields the zero value,
// whose hints all take the MCP specification's defaults.
func (p *PublishedAnnotations) Annotations(toolID string) (contracts.ToolAnnotations, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	a, ok := p.byTool[toolID]
	return a, ok
}
