package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// pauseReadTimeout bounds one read of a tool's pause record.
const pauseReadTimeout = 5 * time.Second

// JetStream API error codes the pause read tells apart.
const (
	jsErrNoMessageFound = 10037
	jsErrStreamNotFound = 10059
)

// ToolPaused reads the pause record of toolID — for a gate decision, or the api's resume —
// nil when the tool is not paused. The read is answered by the leader of the bucket's stream (a plain message get,
// never a direct get, which any replica may answer from behind the latest write), so a
// pause the api acknowledged — its write was stored by the leader before the api answered
// — is seen by every decision that starts after the acknowledgement. A bucket that does
// not exist yet (a topology from before the kill switch) holds no pause.
func (e *Env) ToolPaused(ctx context.Context, toolID string) (*contracts.ToolPause, error) {
	bucket := e.Names.ToolPausesBucket()
	req, err := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + contracts.ToolPauseKey(toolID)})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, pauseReadTimeout)
	defer cancel()
	m, err := e.Conn.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, fmt.Errorf("pipeline: read pause of tool %s: %w", toolID, err)
	}
	var resp struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("pipeline: read pause of tool %s: %w", toolID, err)
	}
	switch {
	case resp.Error != nil && (resp.Error.ErrCode == jsErrNoMessageFound || resp.Error.ErrCode == jsErrStreamNotFound):
		return nil, nil
	case resp.Error != nil:
		return nil, fmt.Errorf("pipeline: read pause of tool %s: %s (%d)", toolID, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, fmt.Errorf("pipeline: read pause of tool %s: empty reply", toolID)
	}
	if kvDeleted(resp.Message.Header) {
		return nil, nil
	}
	var p contracts.ToolPause
	if err := json.Unmarshal(resp.Message.Data, &p); err != nil {
		return nil, fmt.Errorf("pipeline: pause record of tool %s: %w", toolID, err)
	}
	return &p, nil
}

// kvDeleted reports whether a stored KV message's headers (NATS wire form:
// "NATS/1.0\r\nKey: value\r\n…") mark a delete or purge.
func kvDeleted(hdrs []byte) bool {
	for _, line := range strings.Split(string(hdrs), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "KV-Operation") {
			op := strings.TrimSpace(v)
			return op == "DEL" || op == "PURGE"
		}
	}
	return false
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
