package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// Server-sent events of GET /v1/stream. Each event names what changed; the payloads are
// small on purpose (a ticket, or the ids of a changed batch or call) and the console
// re-reads the batch views it shows, so a missed or coalesced event costs one extra read,
// never a wrong screen.
const (
	// EventHello is the first event of every stream; a client (re)loads its full state
	// when it sees it, which closes the gap of a reconnect.
	EventHello = "hello"
	// EventTicket: {"op":"put","correlation_id","ticket"} or {"op":"delete","correlation_id"}.
	EventTicket = "ticket"
	// EventBatch: {"op","batch_id"} when a batch record is written (created, finalized,
	// published).
	EventBatch = "batch"
	// runWatch is the watch of the runs bucket, whose record holds a run's current batch:
	// its changes are sent as EventBatch.
	runWatch = "run"
	// EventCall: {"op","batch_id","call_id","phase"} when a call record is written.
	EventCall = "call"
	// EventResync: the server lost its watch of the records and restarted it; reload.
	EventResync = "resync"
)

// Stream timings.
const (
	streamPing         = 15 * time.Second
	streamWriteTimeout = 10 * time.Second
	streamBuffer       = 256
	watchRetry         = time.Second
)

type sseEvent struct {
	// id, when set, is the event's id: what a reconnecting client sends as Last-Event-ID.
	id   string
	name string
	data []byte
}

// subscriber is one open event stream. ch is closed by the hub when the subscriber falls
// so far behind that its buffer fills; the stream then ends and the client reconnects
// (and reloads), rather than the hub blocking every other stream.
type subscriber struct {
	ch chan sseEvent
}

// hub fans KV changes out to event streams. The KV watchers run only while at least one
// stream is open, so an api nobody watches costs nothing.
type hub struct {
	parent context.Context
	env    Deps
	log    zerolog.Logger
	max    int

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	stop   context.CancelFunc // of the running watchers; nil when idle
	closed bool
	wg     sync.WaitGroup
}

func newHub(parent context.Context, env Deps, log zerolog.Logger, max int) *hub {
	return &hub{parent: parent, env: env, log: log, max: max, subs: make(map[*subscriber]struct{})}
}

var errTooManyStreams = errors.New("too many event streams")

// subscribe registers a stream and makes sure the watchers run. When it returns, every
// record change from then on reaches the subscriber.
func (h *hub) subscribe() (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.parent.Err() != nil {
		return nil, h.parent.Err()
	}
	if len(h.subs) >= h.max {
		return nil, errTooManyStreams
	}
	if h.stop == nil {
		if err := h.startLocked(); err != nil {
			return nil, err
		}
	}
	sub := &subscriber{ch: make(chan sseEvent, streamBuffer)}
	h.subs[sub] = struct{}{}
	return sub, nil
}

// unsubscribe removes a stream; the last one stops the watchers.
func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sub]; ok {
		delete(h.subs, sub)
		close(sub.ch)
	}
	if len(h.subs) == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// startLocked creates the three watchers synchronously (so a change right after subscribe
// is not missed) and consumes them in goroutines.
func (h *hub) startLocked() error {
	ctx, cancel := context.WithCancel(h.parent)
	type watched struct {
		kind, bucket string
		w            jetstream.KeyWatcher
	}
	var ws []watched
	// The batches, calls and runs buckets exist once per partition: one watcher each.
	targets := []struct{ kind, bucket string }{{EventTicket, h.env.Names.TicketsBucket()}}
	for _, pn := range h.env.Names.EachPartition() {
		targets = append(targets, []struct{ kind, bucket string }{
			{EventBatch, pn.BatchesBucket()}, {EventCall, pn.CallsBucket()}, {runWatch, pn.RunsBucket()},
		}...)
	}
	for _, b := range targets {
		w, err := h.watch(ctx, b.bucket)
		if err != nil {
			cancel()
			for _, x := range ws {
				_ = x.w.Stop()
			}
			return err
		}
		ws = append(ws, watched{b.kind, b.bucket, w})
	}
	h.stop = cancel
	h.listenProgress(ctx)
	for _, x := range ws {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.run(ctx, x.kind, x.bucket, x.w)
		}()
	}
	return nil
}

func (h *hub) watch(ctx context.Context, bucket string) (jetstream.KeyWatcher, error) {
	w, err := h.env.WatchBucket(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("api: watch %s: %w", bucket, err)
	}
	return w, nil
}

// run forwards one watcher's changes until ctx ends. If the watcher dies (its ordered
// consumer could not be recreated), it is re-established and every stream told to resync.
func (h *hub) run(ctx context.Context, kind, bucket string, w jetstream.KeyWatcher) {
	for {
		h.forward(ctx, kind, w)
		for {
			if ctxsleep.Sleep(ctx, watchRetry) != nil {
				return
			}
			var err error
			if w, err = h.watch(ctx, bucket); err == nil {
				break
			}
			h.log.Warn().Err(err).Str("bucket", bucket).Msg("event stream: re-watch failed")
		}
		h.broadcast(sseEvent{name: EventResync, data: []byte("{}")})
	}
}

// forward broadcasts the stream event of each change w delivers until ctx ends or w
// closes, then stops w.
func (h *hub) forward(ctx context.Context, kind string, w jetstream.KeyWatcher) {
	state.Follow(ctx, w, nil, func(e jetstream.KeyValueEntry) {
		if ev, ok := h.event(kind, e); ok {
			h.broadcast(ev)
		}
	})
}

// event turns a KV change into a stream event.
func (h *hub) event(kind string, e jetstream.KeyValueEntry) (sseEvent, bool) {
	op := "put"
	if e.Operation() != jetstream.KeyValuePut {
		op = "delete"
	}
	var payload any
	switch kind {
	case EventTicket:
		m := map[string]any{"op": op, "correlation_id": e.Key()}
		if op == "put" {
			var t contracts.ResumeTicket
			if contracts.DecodeRecord(e.Value(), &t) != nil {
				return sseEvent{}, false
			}
			m["ticket"] = t
		}
		payload = m
	case EventBatch:
		batchID, ok := batchIDOfKey(e.Key())
		if !ok {
			return sseEvent{}, false
		}
		payload = map[string]any{"op": op, "batch_id": batchID}
	case runWatch:
		// The run record holds its current batch (recorded, then finalized): a change of
		// it is a change of that batch; the archive's writes come through EventBatch.
		var run contracts.RunRecord
		if op != "put" || contracts.DecodeRecord(e.Value(), &run) != nil || run.Batch == nil {
			return sseEvent{}, false
		}
		kind = EventBatch
		payload = map[string]any{"op": op, "batch_id": run.Batch.Submission.BatchID()}
	case EventCall:
		// {target}.{run_id}.{step}.{call_key}: the call id as its key token, as before.
		_, runID, step, _, err := contracts.ParseCallKey(e.Key())
		if err != nil {
			return sseEvent{}, false
		}
		m := map[string]any{"op": op, "batch_id": contracts.BatchID(runID, step), "call_id": e.Key()[strings.LastIndexByte(e.Key(), '.')+1:]}
		if op == "put" {
			var rec contracts.CallRecord
			if contracts.DecodeRecord(e.Value(), &rec) == nil {
				m["phase"] = rec.Phase.Kind
			}
		}
		payload = m
	default:
		return sseEvent{}, false
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return sseEvent{}, false
	}
	return sseEvent{name: kind, data: data}, true
}

// batchIDOfKey inverts [contracts.BatchKey].
func batchIDOfKey(key string) (string, bool) {
	i := strings.LastIndexByte(key, '.')
	if i < 0 {
		return "", false
	}
	step, err := strconv.ParseInt(key[i+1:], 10, 64)
	if err != nil || contracts.ValidateID("run_id", key[:i]) != nil {
		return "", false
	}
	return contracts.BatchID(key[:i], step), true
}

// broadcast hands ev to every stream without blocking; a stream whose buffer is full is
// dropped (its channel closed) and reconnects.
func (h *hub) broadcast(ev sseEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		select {
		case sub.ch <- ev:
		default:
			delete(h.subs, sub)
			close(sub.ch)
		}
	}
}

// wait returns once every watcher goroutine has ended (the parent context is cancelled
// by Stop).
func (h *hub) wait() { h.wg.Wait() }

// serveStream is GET /v1/stream.
func (s *Service) serveStream(w http.ResponseWriter, r *http.Request) {
	sub, err := s.hub.subscribe()
	if err != nil {
		if errors.Is(err, errTooManyStreams) || s.streams.Err() != nil {
			s.writeError(w, r, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "%v", err))
			return
		}
		s.writeError(w, r, internalErr(err))
		return
	}
	defer s.hub.unsubscribe(sub)
	write := startEventStream(w)
	hello, _ := json.Marshal(map[string]string{"service": MicroName, "version": ServiceVersion})
	if !write("retry: 2000\n\n" + formatEvent(sseEvent{name: EventHello, data: hello})) {
		return
	}
	ping := time.NewTicker(streamPing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.streams.Done():
			return // Stop: streams end first, since they never finish by themselves
		case <-ping.C:
			if !write(": ping\n\n") {
				return
			}
		case ev, ok := <-sub.ch:
			if !ok {
				return // dropped for falling behind; the client reconnects and reloads
			}
			if !write(formatEvent(ev)) {
				return
			}
		}
	}
}

// startEventStream sends the headers of a server-sent event stream and returns the
// function that writes and flushes one chunk of it, each under its own write deadline
// (the server has none, since streams are long-lived); false when the client is gone.
func startEventStream(w http.ResponseWriter) (write func(chunk string) bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return func(chunk string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write([]byte(chunk)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
}

// formatEvent renders one server-sent event. data is single-line JSON (encoding/json never
// emits a raw newline), so one data field carries it.
func formatEvent(ev sseEvent) string {
	id := ""
	if ev.id != "" {
		id = "id: " + ev.id + "\n"
	}
	return id + "event: " + ev.name + "\ndata: " + string(ev.data) + "\n\n"
}
