package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// pauseReadTimeout bounds one read of a tool's pause record.
const pauseReadTimeout = 5 * time.Second

// ToolPaused reads the pause record of toolID — for a gate decision, or the api's resume —
// nil when the tool is not paused. The read is answered by the leader of the bucket's
// stream ([state.ReadFromLeader]; never a direct get, which any replica may answer from
// behind the latest write), so a
// pause the api acknowledged — its write was stored by the leader before the api answered
// — is seen by every decision that starts after the acknowledgement. A bucket that does
// not exist yet (a topology from before the kill switch) holds no pause.
func (e *Env) ToolPaused(ctx context.Context, toolID string) (*contracts.ToolPause, error) {
	rctx, cancel := context.WithTimeout(ctx, pauseReadTimeout)
	defer cancel()
	m, err := state.ReadFromLeader(rctx, e.Conn, e.Names.ToolPausesBucket(), contracts.ToolPauseKey(toolID))
	switch {
	case errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrBucketNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("pipeline: read pause of tool %s: %w", toolID, err)
	}
	var p contracts.ToolPause
	if err := json.Unmarshal(m.Data, &p); err != nil {
		return nil, fmt.Errorf("pipeline: pause record of tool %s: %w", toolID, err)
	}
	return &p, nil
}

// ToolPauses lists every paused tool by id (reads the whole bucket; an absent bucket
// holds no pause).
func (e *Env) ToolPauses(ctx context.Context) (map[string]contracts.ToolPause, error) {
	out := map[string]contracts.ToolPause{}
	kv, err := e.JS.KeyValue(ctx, e.Names.ToolPausesBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: tool pauses: %w", err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("pipeline: tool pauses: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pipeline: tool pauses: %w", ctx.Err())
		case entry := <-w.Updates():
			if entry == nil {
				return out, nil // the initial values are all delivered
			}
			var p contracts.ToolPause
			if err := json.Unmarshal(entry.Value(), &p); err != nil {
				e.Log.Warn().Err(err).Str("key", entry.Key()).Msg("unreadable tool pause record; ignored")
				continue
			}
			out[p.ToolID] = p
		}
	}
}
