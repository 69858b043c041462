package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// waitTimeout bounds every WaitFor in these tests; generous for a loaded 2-core machine
// running -race, never reached when the code is right.
const waitTimeout = 30 * time.Second

// harness is one embedded server with the awaken topology.
type harness struct {
	t     *testing.T
	srv   *natstest.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	names contracts.Names
	pub   *bus.Publisher
	ctx   context.Context
	logs  *natstest.SyncBuffer
	log   zerolog.Logger
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	names := contracts.NewNames("")
	if err := bus.EnsureTopology(ctx, js, names, bus.TopologyConfig{}); err != nil {
		t.Fatal(err)
	}
	ensureTestStream(t, ctx, js, names)
	logs := &natstest.SyncBuffer{}
	return &harness{t: t, srv: srv, nc: nc, js: js, names: names, pub: bus.NewPublisher(js), ctx: ctx,
		logs: logs, log: zerolog.New(logs).Level(zerolog.DebugLevel)}
}

// The bus is exercised on a stream of the tests' own: every hand-off of the pipeline is a
// record revision, and no awaken stream holds plain work messages any more.
const testType = "io.awaken.test.work.v1"

// testRequest is the payload of the tests' work messages.
type testRequest struct {
	RunID string `json:"run_id"`
	Step  int64  `json:"step"`
	Index int    `json:"index"`
	Probe bool   `json:"probe,omitempty"`
}

// testStream is the tests' work stream of names; it holds {prefix}.work.>.
func testStream(names contracts.Names) string { return strings.ToUpper(names.Prefix) + "_TESTWORK" }

// testSubject is the tests' work subject of a run.
func testSubject(names contracts.Names, run string) string { return names.Prefix + ".work.gate." + run }

// ensureTestStream creates the tests' work stream as the topology creates its streams.
func ensureTestStream(t testing.TB, ctx context.Context, js jetstream.JetStream, names contracts.Names) {
	t.Helper()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: testStream(names), Subjects: []string{names.Prefix + ".work.>"},
		Storage: jetstream.FileStorage, Duplicates: bus.DefaultDuplicates,
	}); err != nil {
		t.Fatal(err)
	}
}

// event returns a test work event with a deterministic id.
func (h *harness) event(id string, payload any) cloudevent.Event {
	h.t.Helper()
	e, err := cloudevent.NewEvent(id, "awaken/test", testType, payload)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

func (h *harness) publish(subject string, e cloudevent.Event) {
	h.t.Helper()
	if _, err := h.pub.Publish(h.ctx, subject, e); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) streamMsgs(stream string) []*jetstream.RawStreamMsg {
	h.t.Helper()
	st, err := h.js.Stream(h.ctx, stream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := st.Info(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(h.ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// spec is a fast consumer on the work subjects of the tests' stream.
func (h *harness) spec(durable string) bus.ConsumerSpec {
	return bus.ConsumerSpec{
		Stream:         testStream(h.names),
		Durable:        durable,
		FilterSubjects: []string{h.names.Prefix + ".work.gate.>"},
		AckWait:        2 * time.Second,
		MaxDeliver:     5,
		BackOff:        []time.Duration{20 * time.Millisecond},
		AcceptTypes:    []string{testType},
		Names:          h.names,
	}
}

// consume starts a subscription that the test's cleanup stops.
func (h *harness) consume(spec bus.ConsumerSpec, fn bus.Handler) *bus.Subscription {
	h.t.Helper()
	sub, err := bus.Consume(h.ctx, h.js, spec, fn, h.log)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sub.Stop(ctx)
	})
	return sub
}

// settled waits until the consumer has nothing pending or unacknowledged.
func (h *harness) settled(sub *bus.Subscription) *jetstream.ConsumerInfo {
	h.t.Helper()
	var info *jetstream.ConsumerInfo
	natstest.WaitFor(h.t, waitTimeout, func() bool {
		var err error
		info, err = sub.Consumer().Info(h.ctx)
		if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
			return false
		}
		// Nothing pending is not enough: right after a publish the consumer may not count
		// the new messages yet. Settled means its ack floor reached the stream's last
		// message (the tests' consumers filter every subject they publish).
		stream, err := h.js.Stream(h.ctx, info.Stream)
		if err != nil {
			return false
		}
		sinfo, err := stream.Info(h.ctx)
		return err == nil && info.Delivered.Stream >= sinfo.State.LastSeq
	}, "the consumer to settle every message")
	return info
}

// lines collects what a hook the consumer calls was told, one formatted line a call, in
// call order, safely across workers.
type lines struct {
	mu   sync.Mutex
	list []string
}

func (l *lines) addf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, fmt.Sprintf(format, args...))
}

// String is the lines so far, printed as fmt.Sprint prints a []string.
func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.list)
}

// recorder collects what a handler saw, safely across workers.
type recorder struct {
	mu         sync.Mutex
	deliveries []bus.Delivery
}

func (r *recorder) add(d bus.Delivery) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, d)
	return len(r.deliveries)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.deliveries)
}

func (r *recorder) all() []bus.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bus.Delivery(nil), r.deliveries...)
}

func (r *recorder) delivered() []uint64 {
	var out []uint64
	for _, d := range r.all() {
		out = append(out, d.NumDelivered)
	}
	return out
}

func (r *recorder) String() string { return fmt.Sprint(r.delivered()) }

// waitRedelivered waits until the handler has seen the message a second time (what says
// what is awaited) and fails t unless those were its first and second deliveries.
func (r *recorder) waitRedelivered(t *testing.T, what string) {
	t.Helper()
	natstest.WaitFor(t, waitTimeout, func() bool { return r.count() == 2 }, what)
	if got := r.String(); got != "[1 2]" {
		t.Fatalf("delivery counts %s, want [1 2]", got)
	}
}
