package mcpserve

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// progressSender sends the notifications/progress of one call: those of its wait on a
// ticket and those its running tool reports. MCP requires the progress value to increase
// with every notification of a token, so the two are put on one scale: a parked report is
// the last value plus one, and a tool's report keeps its own value and total unless that
// would not increase (it came after parked reports, or a later attempt starts over), in
// which case both are shifted past the last value sent.
type progressSender struct {
	req   *mcp.CallToolRequest
	token any
	log   zerolog.Logger

	mu     sync.Mutex
	last   float64
	offset float64
}

// parked sends a report of the wait on a ticket.
func (p *progressSender) parked(ctx context.Context, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.send(ctx, p.last+1, 0, msg)
}

// tool sends a report of the running tool.
func (p *progressSender) tool(ctx context.Context, tp contracts.ToolProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tp.Progress+p.offset <= p.last {
		p.offset = p.last + 1 - tp.Progress
	}
	total := tp.Total
	if total > 0 {
		total += p.offset
	}
	p.send(ctx, tp.Progress+p.offset, total, tp.Message)
}

// send sends one notification (p.mu held, so they go out in the order of their values).
func (p *progressSender) send(ctx context.Context, progress, total float64, msg string) {
	p.last = progress
	err := p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: progress, Total: total, Message: msg})
	if err != nil && ctx.Err() == nil {
		p.log.Warn().Err(err).Msg("mcp: progress notification failed")
	}
}

// subscribeFlush bounds the wait for the server to confirm the progress subscription.
const subscribeFlush = 5 * time.Second

// followToolProgress forwards the progress reports of call callID of batch batchID (on
// its run's events subject) to p until ctx ends. Progress is best effort end to end: a
// subscription that fails costs only the notifications.
func (s *Server) followToolProgress(ctx context.Context, p *progressSender, runID, batchID, callID string) {
	reports := make(chan contracts.ToolProgress, 16)
	sub, err := s.opts.Client.Conn().Subscribe(s.names.EventsSubject(runID), func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil || ev.Type != contracts.TypeToolProgress {
			return
		}
		var tp contracts.ToolProgress
		if json.Unmarshal(ev.Data, &tp) != nil || tp.BatchID != batchID || tp.CallID != callID {
			return
		}
		select {
		case reports <- tp:
		default: // a slow client misses a report; the next one says more
		}
	})
	if err != nil {
		p.log.Warn().Err(err).Msg("mcp: no progress of the running tool (subscribe failed)")
		return
	}
	// The subscription must be in place before the batch is submitted: flush it.
	flushCtx, cancel := context.WithTimeout(ctx, subscribeFlush)
	defer cancel()
	if err := s.opts.Client.Conn().FlushWithContext(flushCtx); err != nil && ctx.Err() == nil {
		p.log.Warn().Err(err).Msg("mcp: progress subscription not confirmed")
	}
	go func() {
		defer func() { _ = sub.Unsubscribe() }()
		for {
			select {
			case <-ctx.Done():
				return
			case tp := <-reports:
				p.tool(ctx, tp)
			}
		}
	}()
}
