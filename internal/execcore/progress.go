package execcore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/toolctx"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ProgressInterval is the least time between two progress events of one call: a tool may
// report as often as it likes, the executor publishes at most one report per interval and
// always the last one (when the interval ends, or when the body returns).
const ProgressInterval = 250 * time.Millisecond

// maxProgressMessage bounds the message of one progress report (bytes).
const maxProgressMessage = 1024

// progressReporter throttles and publishes the progress reports of one attempt of one
// call.
type progressReporter struct {
	x    *Executor
	inv  Invocation
	log  zerolog.Logger
	mu   sync.Mutex
	seq  uint64
	last time.Time               // when the last event was published
	held *contracts.ToolProgress // the latest report not yet published
	wake *time.Timer             // publishes held when the interval ends
	done bool
}

// withProgress returns ctx carrying a progress reporter for inv (what tool.ReportProgress
// reports to: published throttled as io.awaken.tool.progress.v1 on the run's events
// subject, never part of the call's record or result, never blocking), and the function that
// ends it once the body returned: the last report held back by the throttle is published
// then, and later reports (from a body that outlived its timeout) are dropped.
func (x *Executor) withProgress(ctx context.Context, inv Invocation) (context.Context, func()) {
	r := &progressReporter{x: x, inv: inv, log: *zerolog.Ctx(ctx)}
	return toolctx.WithProgress(ctx, r.report), r.finish
}

func (r *progressReporter) report(progress, total float64, message string) {
	if math.IsNaN(progress) || math.IsInf(progress, 0) || math.IsNaN(total) || math.IsInf(total, 0) {
		return // not representable in JSON
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.seq++
	p := &contracts.ToolProgress{
		BatchID: contracts.BatchID(r.inv.RunID, r.inv.Step), RunID: r.inv.RunID, Step: r.inv.Step, Index: r.inv.Index,
		CallID: r.inv.CallID, ToolID: r.inv.ToolID, Attempt: r.inv.Attempt, Seq: r.seq,
		Progress: progress, Total: total, Message: truncate(message, maxProgressMessage),
	}
	wait := ProgressInterval - time.Since(r.last)
	if wait <= 0 {
		r.held = nil
		r.publishLocked(p)
		return
	}
	r.held = p
	if r.wake == nil {
		r.wake = time.AfterFunc(wait, r.flush)
	}
}

// flush publishes the held report, if any.
func (r *progressReporter) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wake = nil
	if r.held != nil {
		p := r.held
		r.held = nil
		r.publishLocked(p)
	}
}

func (r *progressReporter) finish() {
	r.mu.Lock()
	if r.wake != nil {
		r.wake.Stop()
		r.wake = nil
	}
	held := r.held
	r.held, r.done = nil, true
	if held != nil {
		r.publishLocked(held)
	}
	r.mu.Unlock()
}

// publishLocked publishes p best effort: a core NATS publish (the events stream stores it,
// unacknowledged), buffered by the connection, so a slow or absent server never blocks the
// tool; an error is logged and forgotten.
func (r *progressReporter) publishLocked(p *contracts.ToolProgress) {
	r.last = time.Now()
	if r.x.env.Conn == nil {
		return
	}
	id := fmt.Sprintf("%s:progress:%d:%d", r.inv.OperationID, r.inv.Attempt, p.Seq)
	ev, err := r.x.env.Event(r.x.opts.Service, id, contracts.TypeToolProgress, p)
	if err == nil {
		ev.Time = r.x.env.Now()
		err = r.x.env.Conn.PublishMsg(cloudevent.EncodeMsg(r.x.env.Names.EventsSubject(r.inv.RunID), ev))
	}
	if err != nil {
		r.log.Debug().Err(err).Msg("progress event not published")
	}
}
