package api

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// EventProgress is the server-sent event of a tool's progress: the
// io.awaken.tool.progress.v1 payload as published ({batch_id, call_id, progress, total,
// message, …}). Progress is best effort end to end: the hub hears it on a plain
// subscription, and a stream that misses one simply shows the next.
const EventProgress = "progress"

// listenProgress forwards the progress events of every run to the open streams until ctx
// ends. A failure to subscribe costs only the live progress, so it is logged, not fatal.
func (h *hub) listenProgress(ctx context.Context) {
	stop, err := h.env.ListenNotices(h.env.Names.EventsSubject("*"), func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil || ev.Type != contracts.TypeToolProgress {
			return
		}
		var p contracts.ToolProgress
		if json.Unmarshal(ev.Data, &p) != nil {
			return
		}
		data, err := json.Marshal(p)
		if err != nil {
			return
		}
		h.broadcast(sseEvent{name: EventProgress, data: data})
	})
	if err != nil {
		h.log.Warn().Err(err).Msg("event stream: no live progress (subscribe failed)")
		return
	}
	context.AfterFunc(ctx, func() { _ = stop() })
}
