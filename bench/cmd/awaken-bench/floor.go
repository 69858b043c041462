package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// hopsDoc documents what the floor relay does, counted from the pipeline's code (see
// services/gate/request.go, internal/execcore/core.go and counter.go, services/batcher,
// services/publisher/handle.go, internal/state/store.go).
const hopsDoc = "per call on the sequential path, 3 deliveries and 10 round trips: " +
	"gate [consume gate request; KV create call (decision+Executing); 2 async publishes audit+tool_call fact (1 round trip); publish exec request; double ack] " +
	"exec [consume exec request; KV get; KV CAS update (completed: echo is replay_safe, so no entered write); publish call output; double ack] " +
	"batcher [consume output; publish next gate request; double ack]. " +
	"Per batch: submit [client publish; consume; KV get + CAS run record (claim); KV create batch; publish first gate request; double ack], " +
	"publisher per output [consume; double ack], for the last output also [KV get batch; one batch get of the call records; KV get + CAS finalized; KV get + CAS run record (settle); atomic batch publish of n results + finalized; n async fact publishes; KV get + CAS published], " +
	"client [core subscription on the subject where the results stream republishes what it stored]. " +
	"(Before issue 17's cuts: an entered write per call before the tool ran, 11 round trips per call. Before the optimisation of issue 8: 16 round trips per call — a KV get before the gate's create and a body-run ledger write per call — a KV get of the batch per output, a KV watch to list the call records, and a client that created an ordered consumer per batch.)"

const floorWorkers = 8

// floor is a logic-free relay that performs the pipeline's JetStream operations, in the
// same order and on the same kind of server, with opaque payloads: what no
// message-driven design with these durable steps can beat on this server.
type floor struct {
	nats    *backend
	nc      *nats.Conn
	js      jetstream.JetStream
	calls   jetstream.KeyValue
	batches jetstream.KeyValue
	runs    jetstream.KeyValue
	conns   []*nats.Conn
	quit    context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// newFloor starts the relay at durability level lvl on one embedded server or (cluster)
// on a 3-node cluster with its streams and buckets R3.
func newFloor(ctx context.Context, lvl level, cluster bool) (*floor, error) {
	name := "floor"
	if cluster {
		name = "floor-cluster"
	}
	b, err := newBackend(name, lvl, cluster)
	if err != nil {
		return nil, err
	}
	f := &floor{nats: b}
	f.quit, f.cancel = context.WithCancel(context.Background())
	conn := func(name string) (jetstream.JetStream, error) {
		nc, err := b.dial(name)
		if err != nil {
			return nil, err
		}
		f.conns = append(f.conns, nc)
		return jetstream.New(nc)
	}
	js, err := conn("floor-client")
	if err != nil {
		f.close()
		return nil, err
	}
	f.nc, f.js = f.conns[0], js
	for _, sc := range []jetstream.StreamConfig{
		{Name: "FLOOR_SUBMIT", Subjects: []string{"floor.submit"}},
		{Name: "FLOOR_WORK", Subjects: []string{"floor.work.>"}},
		{Name: "FLOOR_RESULTS", Subjects: []string{"floor.results.>"}, AllowAtomicPublish: true,
			RePublish: &jetstream.RePublish{Source: "floor.results.>", Destination: "floor.committed.>"}},
		{Name: "FLOOR_SIDE", Subjects: []string{"floor.side.>"}},
	} {
		sc.Storage, sc.Replicas, sc.Duplicates, sc.MaxAge = jetstream.FileStorage, b.replicas, 2*time.Minute, 24*time.Hour
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			f.close()
			return nil, err
		}
	}
	kv := func(name string) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1, Storage: jetstream.FileStorage, Replicas: b.replicas})
	}
	if f.calls, err = kv("FLOOR_CALLS"); err == nil {
		if f.batches, err = kv("FLOOR_BATCHES"); err == nil {
			f.runs, err = kv("FLOOR_RUNS")
		}
	}
	if err == nil && cluster {
		err = waitAllStreamLeaders(ctx, js)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	stages := []struct {
		name, stream, filter string
		h                    func(context.Context, *stageEnv, fmsg) error
	}{
		{"submit", "FLOOR_SUBMIT", "floor.submit", stageSubmit},
		{"gate", "FLOOR_WORK", "floor.work.gate", stageGate},
		{"exec", "FLOOR_WORK", "floor.work.exec", stageExec},
		{"batcher", "FLOOR_WORK", "floor.work.out", stageBatcher},
		{"publisher", "FLOOR_WORK", "floor.work.out", stagePublisher},
	}
	for _, st := range stages {
		sjs, err := conn("floor-" + st.name)
		if err != nil {
			f.close()
			return nil, err
		}
		env := &stageEnv{js: sjs}
		for _, b := range []struct {
			dst  *jetstream.KeyValue
			name string
		}{{&env.calls, "FLOOR_CALLS"}, {&env.batches, "FLOOR_BATCHES"}, {&env.runs, "FLOOR_RUNS"}} {
			if *b.dst, err = sjs.KeyValue(ctx, b.name); err != nil {
				f.close()
				return nil, err
			}
		}
		cons, err := sjs.CreateOrUpdateConsumer(ctx, st.stream, jetstream.ConsumerConfig{
			Durable: st.name, FilterSubject: st.filter, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxDeliver: 10,
		})
		if err != nil {
			f.close()
			return nil, err
		}
		// The pipeline's pull loop (internal/bus): fetch as many messages as there are
		// free workers and hand each to a worker as it arrives. (nats.go's Messages
		// iterator, used here before, stalled for a whole pull expiry under the
		// throughput load.)
		work := make(chan jetstream.Msg)
		slots := make(chan struct{}, floorWorkers)
		for range floorWorkers {
			f.wg.Go(func() {
				for m := range work {
					fm, perr := parseFloor(string(m.Data()))
					if perr == nil {
						perr = st.h(context.Background(), env, fm)
					}
					if perr != nil {
						_ = m.Nak()
					} else {
						actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						_ = m.DoubleAck(actx)
						cancel()
					}
					<-slots
				}
			})
		}
		f.wg.Go(func() {
			defer close(work)
			for {
				select {
				case slots <- struct{}{}:
				case <-f.quit.Done():
					return
				}
				n := 1
			grab:
				for n < floorWorkers {
					select {
					case slots <- struct{}{}:
						n++
					default:
						break grab
					}
				}
				fctx, cancel := context.WithTimeout(f.quit, 5*time.Second)
				batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
				got := 0
				if err == nil {
					for m := range batch.Messages() {
						got++
						work <- m
					}
				}
				cancel()
				for range n - got {
					<-slots
				}
			}
		})
	}
	return f, nil
}

// fmsg is the relay's payload: which call of which batch.
type fmsg struct {
	run      string
	step     int64
	index, n int
}

func (m fmsg) String() string { return fmt.Sprintf("%s|%d|%d|%d", m.run, m.step, m.index, m.n) }
func (m fmsg) batch() string  { return fmt.Sprintf("%s.%d", m.run, m.step) }
func (m fmsg) call(i int) string {
	return fmt.Sprintf("%s.%d.c%d", m.run, m.step, i)
}

func parseFloor(s string) (fmsg, error) {
	p := strings.Split(s, "|")
	if len(p) != 4 {
		return fmsg{}, errors.New("bad floor message")
	}
	step, err1 := strconv.ParseInt(p[1], 10, 64)
	i, err2 := strconv.Atoi(p[2])
	n, err3 := strconv.Atoi(p[3])
	return fmsg{p[0], step, i, n}, errors.Join(err1, err2, err3)
}

type stageEnv struct {
	js                   jetstream.JetStream
	calls, batches, runs jetstream.KeyValue
}

// casRun rewrites the run record of m by compare-and-swap (creating it on the run's first
// batch), as the batcher's claim and the publisher's settle do.
func (e *stageEnv) casRun(ctx context.Context, m fmsg, value string) error {
	cur, err := e.runs.Get(ctx, m.run)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		_, err = e.runs.Create(ctx, m.run, []byte(value))
		return ignoreExists(err)
	case err != nil:
		return err
	}
	_, err = e.runs.Update(ctx, m.run, []byte(value), cur.Revision())
	return err
}

func (e *stageEnv) publish(ctx context.Context, subj, id, data string) error {
	m := nats.NewMsg(subj)
	m.Data = []byte(data)
	m.Header.Set(jetstream.MsgIDHeader, id)
	_, err := e.js.PublishMsg(ctx, m)
	return err
}

func (e *stageEnv) publishAll(ctx context.Context, subj []string, ids []string, data string) error {
	fs := make([]jetstream.PubAckFuture, len(subj))
	for i := range subj {
		m := nats.NewMsg(subj[i])
		m.Data = []byte(data)
		m.Header.Set(jetstream.MsgIDHeader, ids[i])
		f, err := e.js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		fs[i] = f
	}
	for _, f := range fs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func ignoreExists(err error) error {
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return err
}

func stageSubmit(ctx context.Context, e *stageEnv, m fmsg) error {
	if err := e.casRun(ctx, m, m.batch()); err != nil {
		return err
	}
	if _, err := e.batches.Create(ctx, m.batch(), []byte(m.String())); ignoreExists(err) != nil {
		return err
	}
	m.index = 0
	return e.publish(ctx, "floor.work.gate", m.call(0)+":gate", m.String())
}

func stageGate(ctx context.Context, e *stageEnv, m fmsg) error {
	key := m.call(m.index)
	if _, err := e.calls.Create(ctx, key, []byte("executing")); ignoreExists(err) != nil {
		return err
	}
	if err := e.publishAll(ctx, []string{"floor.side.audit", "floor.side.fact"},
		[]string{key + ":audit", key + ":event:tool_call"}, m.String()); err != nil {
		return err
	}
	return e.publish(ctx, "floor.work.exec", key+":exec:1", m.String())
}

func stageExec(ctx context.Context, e *stageEnv, m fmsg) error {
	key := m.call(m.index)
	cur, err := e.calls.Get(ctx, key)
	if err != nil {
		return err
	}
	out := fmt.Sprintf("x%d", m.index) // the echo "tool"
	if _, err := e.calls.Update(ctx, key, []byte(out), cur.Revision()); err != nil {
		return err
	}
	return e.publish(ctx, "floor.work.out", key+":output", m.String())
}

func stageBatcher(ctx context.Context, e *stageEnv, m fmsg) error {
	if m.index+1 >= m.n {
		return nil
	}
	m.index++
	return e.publish(ctx, "floor.work.gate", m.call(m.index)+":gate", m.String())
}

func stagePublisher(ctx context.Context, e *stageEnv, m fmsg) error {
	if m.index != m.n-1 {
		return nil
	}
	if _, err := e.batches.Get(ctx, m.batch()); err != nil {
		return err
	}
	subjects := make([]string, m.n)
	for i := range m.n {
		subjects[i] = "$KV.FLOOR_CALLS." + m.call(i)
	}
	recs, err := jetstreamext.GetLastMsgsFor(ctx, e.js, "KV_FLOOR_CALLS", subjects)
	if err != nil {
		return err
	}
	outs := map[string]string{}
	for r, err := range recs {
		if err != nil {
			return err
		}
		outs[strings.TrimPrefix(r.Subject, "$KV.FLOOR_CALLS.")] = string(r.Data)
	}
	cas := func() error {
		b, err := e.batches.Get(ctx, m.batch())
		if err != nil {
			return err
		}
		_, err = e.batches.Update(ctx, m.batch(), b.Value(), b.Revision())
		return err
	}
	if err := cas(); err != nil {
		return err
	}
	if err := e.casRun(ctx, m, "idle"); err != nil {
		return err
	}
	subj := "floor.results." + m.run
	msgs := make([]*nats.Msg, 0, m.n+1)
	for i := range m.n {
		r := nats.NewMsg(subj)
		r.Data = []byte(outs[m.call(i)])
		r.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:result:%d", m.batch(), i))
		msgs = append(msgs, r)
	}
	fin := nats.NewMsg(subj)
	fin.Data = []byte("finalized")
	fin.Header.Set(jetstream.MsgIDHeader, m.batch()+":finalized")
	msgs = append(msgs, fin)
	if _, err := jetstreamext.PublishMsgBatch(ctx, e.js, msgs); err != nil {
		return err
	}
	subjs, ids := make([]string, m.n), make([]string, m.n)
	for i := range m.n {
		subjs[i], ids[i] = "floor.side.fact", m.call(i)+":event:tool_result"
	}
	if err := e.publishAll(ctx, subjs, ids, "tool_result"); err != nil {
		return err
	}
	return cas()
}

func (f *floor) run(ctx context.Context, runID string, step int64, n int) ([]string, error) {
	m := fmsg{runID, step, 0, n}
	ch := make(chan *nats.Msg, n+1)
	// Like the pipeline's client: the stream's republication of what it stored.
	sub, err := f.nc.ChanSubscribe("floor.committed."+m.run, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := (&stageEnv{js: f.js}).publish(ctx, "floor.submit", m.batch(), m.String()); err != nil {
		return nil, err
	}
	out := make([]string, 0, n)
	for {
		select {
		case r := <-ch:
			if string(r.Data) == "finalized" {
				return out, nil
			}
			out = append(out, string(r.Data))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (f *floor) servers() []*server.Server { return f.nats.nodes }

func (f *floor) close() {
	f.cancel()
	f.wg.Wait()
	for _, nc := range f.conns {
		nc.Close()
	}
	f.nats.stop()
}
