package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	p, err := DecodeToolPause(m.Data, contracts.ToolPauseKey(toolID))
	if err != nil {
		// Refused, not obeyed: only the api writes this bucket, so a record it did not
		// write (a reply the api was made to publish there, a hand-written value) is no
		// pause. It is logged loudly; the catalog lists it as not paused too.
		e.Log.Error().Err(err).Str("tool_id", toolID).Msg("tool pause record refused; the tool is not paused")
		return nil, nil
	}
	return &p, nil
}

// ErrInvalidPauseRecord is wrapped by [DecodeToolPause] for a record that is not exactly
// a [contracts.ToolPause] of the tool its key names.
var ErrInvalidPauseRecord = errors.New("invalid tool pause record")

// DecodeToolPause decodes the pause record stored under key strictly: one JSON object,
// no unknown field, no trailing data, the tool id the key encodes and a pause time.
func DecodeToolPause(data []byte, key string) (contracts.ToolPause, error) {
	var p contracts.ToolPause
	err := contracts.DecodeRecordStrict(data, &p)
	switch {
	case err != nil:
		return contracts.ToolPause{}, fmt.Errorf("%w under key %s: %w", ErrInvalidPauseRecord, key, err)
	case p.ToolID == "" || contracts.ToolPauseKey(p.ToolID) != key:
		return contracts.ToolPause{}, fmt.Errorf("%w under key %s: it names tool %q", ErrInvalidPauseRecord, key, p.ToolID)
	case p.PausedAt.IsZero():
		return contracts.ToolPause{}, fmt.Errorf("%w under key %s: no paused_at", ErrInvalidPauseRecord, key)
	}
	return p, nil
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
		case entry, ok := <-w.Updates():
			if !ok {
				// The watch ended (its connection closed) before the end of the list: what
				// was read so far is not every pause.
				return nil, errors.New("pipeline: tool pauses: the watch ended before the end of the list")
			}
			if entry == nil {
				return out, nil // the initial values are all delivered
			}
			p, err := DecodeToolPause(entry.Value(), entry.Key())
			if err != nil {
				e.Log.Error().Err(err).Str("key", entry.Key()).Msg("tool pause record refused; the tool is not paused")
				continue
			}
			out[p.ToolID] = p
		}
	}
}

// pauseWatchFirstRead bounds the wait for the pauses bucket's current values when the
// watch starts.
const pauseWatchFirstRead = 5 * time.Second

// pauseView is the pauses bucket kept in memory by a KV watch: what the executors check
// right before a body is entered. The gate's leader read at every decision stays the
// durable authority; this view only stops calls decided before a pause and still queued
// (or redelivered after a crash), and lags a pause by the watch's delivery.
type pauseView struct {
	mu    sync.RWMutex
	byKey map[string]contracts.ToolPause
	ready chan struct{}
}

// WatchedPause is the pause of toolID as the in-memory watch of the pauses bucket holds it
// now, nil when the tool is not paused. The watch starts at the first call (which waits up
// to 5 s for the bucket's current values) and runs for the connection's lifetime. A watch
// that cannot start (no bucket, no grant) or has not caught up yet reports no pause and
// logs why: the gate has already decided the call.
func (e *Env) WatchedPause(ctx context.Context, toolID string) *contracts.ToolPause {
	e.pausesOnce.Do(func() { e.pauses = e.watchPauses() })
	v := e.pauses
	select {
	case <-v.ready:
	case <-ctx.Done():
		return nil
	case <-time.After(pauseWatchFirstRead):
		return nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if p, ok := v.byKey[contracts.ToolPauseKey(toolID)]; ok {
		return &p
	}
	return nil
}

func (e *Env) watchPauses() *pauseView {
	v := &pauseView{byKey: map[string]contracts.ToolPause{}, ready: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), pauseWatchFirstRead)
	defer cancel()
	kv, err := e.JS.KeyValue(ctx, e.Names.ToolPausesBucket())
	if err != nil {
		e.Log.Warn().Err(err).Msg("tool pauses not watched; the executors rely on the gate's check alone")
		return v
	}
	w, err := kv.WatchAll(context.Background())
	if err != nil {
		e.Log.Warn().Err(err).Msg("tool pauses not watched; the executors rely on the gate's check alone")
		return v
	}
	// The watch runs for the connection's lifetime.
	go state.Follow(context.Background(), w, func() { close(v.ready) }, func(entry jetstream.KeyValueEntry) {
		v.mu.Lock()
		defer v.mu.Unlock()
		if entry.Operation() != jetstream.KeyValuePut {
			delete(v.byKey, entry.Key())
		} else if p, err := DecodeToolPause(entry.Value(), entry.Key()); err != nil {
			delete(v.byKey, entry.Key())
			e.Log.Error().Err(err).Str("key", entry.Key()).Msg("tool pause record refused; the tool is not paused")
		} else {
			v.byKey[entry.Key()] = p
		}
	})
	return v
}
