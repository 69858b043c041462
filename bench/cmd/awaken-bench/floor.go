package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
// services/gate/service.go and request.go, internal/pipeline/pauses.go and batches.go,
// internal/execcore/core.go, services/batcher, services/publisher/handle.go and
// results.go, pkg/client/wait.go). Its streams and buckets are the pipeline's, named
// FLOOR_ for AWAKEN_, so -writes-only compares them stream by stream.
const hopsDoc = "per call on the sequential path, 3 deliveries and 7 round trips: " +
	"gate [consume the revision that asks for the call: the run record's that records the batch (call 0; the batch in it) or the previous call's terminal one (the batch cached); the tool's pause read from the leader of the pauses bucket (a JetStream API message get); " +
	"KV create call under the target's key (decision+Executing+input, announced: this revision is the executor request); 1 round trip: the audit copy; then the live tool_call fact (core NATS, not stored); double ack] " +
	"exec [consume the announced revision on the calls bucket's stream (filter: its target's keys); KV get; KV CAS update (completed: echo is replay_safe, so no entered write), announced: this revision is the call's output; double ack] " +
	"gate-outputs [consume the terminal revision on the calls bucket's stream; double ack; it is the next call's gate delivery above] " +
	"(every consumer of a bucket's stream also receives the revisions it does not act on, acked unread). " +
	"Per batch: submit [client publish; consume; KV get run record; when it holds the run's previous batch (finalized): KV create of that batch's archive (refused without a store when the publisher archived it first); " +
	"KV CAS (or create) run record: claim and record the batch in one write, announced: this revision is the gate's work; double ack], " +
	"publisher per output [consume; double ack; KV get run record on the batch's first output (then cached)], for the last output also " +
	"[KV get run record; one batch get of the call records; KV get + CAS run record (finalize and release in one write); " +
	"1 round trip: the results message (every result and the finalized payload, one stored message); then n live tool_result facts (core NATS, not stored); " +
	"then, off the path the client waits on: KV create of the archive (published), or KV get + CAS finalized -> published when the next batch's claim archived it first], " +
	"client [core subscriptions on its rejections and on the subject where the results stream republishes what it stored]. " +
	"At P partitions (the -pN rows) the same operations per call and per batch, each on the stores of the run's partition (calls, runs and batches buckets, audit and results streams; submissions shared), every stage consuming every partition's stream. " +
	"(Before issue 47's projections: the tool_call fact was stored beside the audit copy and the tool_result facts beside the results message, 2 stored messages more per call in the same round trips. Before cut B's third step: the batcher published each call's gate request on the work stream (1 stored message and 1 round trip more per call) and the gate read the run record on a batch's first call. Before issue 26's cut B: the executor request and the output announcement were messages of their own on the work stream, 10 round trips per call. Before its cuts A, C-F: the run claim and the batch record two writes, the finalized mark, the run's release and the published mark three, the results and finalized event one atomic batch, the audit copy and the tool_call fact one round trip before the executor request: 16 stored messages per 1-call batch. " +
	"The floor of before that also left out the gate's pause read, which the pipeline has done at every decision since the kill switch. " +
	"Before issue 17's cuts: an entered write per call before the tool ran, 11 round trips per call. Before the optimisation of issue 8: 16 round trips per call — a KV get before the gate's create and a body-run ledger write per call — a KV get of the batch per output, a KV watch to list the call records, and a client that created an ordered consumer per batch.)"

const floorWorkers = 8

// floor is a logic-free relay that performs the pipeline's JetStream operations, in the
// same order, on the same streams and buckets and the same kind of server, with opaque
// payloads: what no message-driven design with these durable steps can beat on this
// server.
type floor struct {
	nats   *backend
	nc     *nats.Conn
	js     jetstream.JetStream
	parts  []floorPart // the names of the partitioned stores
	conns  []*nats.Conn
	quit   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// The floor's names: the pipeline's (internal/bus/topology.go, pkg/contracts/names.go)
// with the prefix floor / FLOOR for awaken / AWAKEN.
const (
	floorSubmit      = "floor.batches.submit"
	floorRejected    = "floor.batches.rejected"
	floorResults     = "floor.results."           // + run (partition 0's: see floorPart)
	floorCommitted   = "floor.committed.results." // + run (every partition's)
	floorEvents      = "floor.events."            // + run
	floorFacts       = "floor.facts."             // + run: live, no stream
	floorAudit       = "floor.audit."             // + run (partition 0's: see floorPart)
	floorResultsName = "FLOOR_RESULTS"
	floorAuditName   = "FLOOR_AUDIT"
	floorCallsKV     = "FLOOR_calls"
	floorBatchesKV   = "FLOOR_batches"
	floorRunsKV      = "FLOOR_runs"
	floorPausesKV    = "FLOOR_tool_pauses"
	floorTool        = "echo"
	floorResultsSep  = "\n"
	floorOpenPrefix  = "open "
	floorFinalPrefix = "finalized "
	// Call records are keyed {target}.{run}.{step}.{call} (contracts.CallKey); a revision
	// that hands work on carries the CloudEvent type of the hand-off in its ce-type header
	// (internal/pipeline/records.go), and its value is the relay's payload, then the state.
	floorTarget     = "brain"
	floorTypeHeader = "ce-type"
	floorTypeExec   = "exec"
	floorTypeOutput = "output"
	// The run-record revision that records a batch is the gate's work for its first call
	// (pipeline.Env.announceRun); its value is the relay's payload, then the state.
	floorTypeRecorded = "recorded"
	floorStateSep     = "#"
)

// floorPart is one partition of the floor's partitioned stores, as the pipeline
// partitions them (contracts.Names.Partition): the calls, runs and batches buckets and the
// audit and results streams, one of each per partition. Partition 0 keeps the names of one
// partition; partition k ≥ 1 suffixes its buckets "_p{k}" and its streams "_P{k}" and puts
// its subjects under "floor.p{k}.". Every operation on a run's records goes to the run's
// partition (partitionOf); the submissions and events streams and the pauses bucket are
// not partitioned, and every results stream republishes on the same subjects, so the
// waiting client does not depend on the partition.
type floorPart struct {
	callsKV, runsKV, batchesKV string
	results, audit             string // stream names
	resultsSubj, auditSubj     string // + run
	// The buckets, opened on the connection of the stage that holds this copy.
	calls, runs, batches jetstream.KeyValue
}

// floorPartitions are the names of parts partitions' stores (parts ≤ 1: one, today's names).
func floorPartitions(parts int) []floorPart {
	out := make([]floorPart, max(parts, 1))
	for k := range out {
		bucket, stream, subj := func(base string) string { return base }, func(base string) string { return base }, floorResults
		auditSubj := floorAudit
		if k > 0 {
			bucket = func(base string) string { return fmt.Sprintf("%s_p%d", base, k) }
			stream = func(base string) string { return fmt.Sprintf("%s_P%d", base, k) }
			subj = strings.Replace(floorResults, "floor.", fmt.Sprintf("floor.p%d.", k), 1)
			auditSubj = strings.Replace(floorAudit, "floor.", fmt.Sprintf("floor.p%d.", k), 1)
		}
		out[k] = floorPart{
			callsKV: bucket(floorCallsKV), runsKV: bucket(floorRunsKV), batchesKV: bucket(floorBatchesKV),
			results: stream(floorResultsName), audit: stream(floorAuditName),
			resultsSubj: subj, auditSubj: auditSubj,
		}
	}
	return out
}

func (p *floorPart) callsSubj() string { return "$KV." + p.callsKV + "." }
func (p *floorPart) runsSubj() string  { return "$KV." + p.runsKV + "." }

// floorStreams are the pipeline's streams the path writes, as internal/bus configures them
// (limits retention, the 2-minute duplicate window; the results stream republishes what it
// stores, for the waiting client), the results and audit streams once per partition.
func floorStreams(parts []floorPart) []jetstream.StreamConfig {
	scs := []jetstream.StreamConfig{
		{Name: "FLOOR_SUBMISSIONS", Subjects: []string{"floor.batches.>"}},
		{Name: "FLOOR_EVENTS", Subjects: []string{floorEvents + ">"}},
	}
	for _, p := range parts {
		scs = append(scs,
			jetstream.StreamConfig{Name: p.results, Subjects: []string{p.resultsSubj + ">"}, AllowAtomicPublish: true,
				RePublish: &jetstream.RePublish{Source: p.resultsSubj + ">", Destination: floorCommitted + ">"}},
			jetstream.StreamConfig{Name: p.audit, Subjects: []string{p.auditSubj + ">"}})
	}
	return scs
}

// floorBuckets are the pipeline's buckets the path reads or writes, with its histories:
// the calls, runs and batches buckets once per partition.
func floorBuckets(parts []floorPart) []jetstream.KeyValueConfig {
	kcs := []jetstream.KeyValueConfig{{Bucket: floorPausesKV, History: 1}}
	for _, p := range parts {
		kcs = append(kcs, jetstream.KeyValueConfig{Bucket: p.callsKV, History: 5},
			jetstream.KeyValueConfig{Bucket: p.runsKV, History: 3}, jetstream.KeyValueConfig{Bucket: p.batchesKV, History: 3})
	}
	return kcs
}

// newFloor starts the relay at durability level lvl on one embedded server or (cluster)
// on a 3-node cluster with its streams and buckets R3, its partitioned stores in
// partitions partitions (0 or 1: one, with today's names).
func newFloor(ctx context.Context, lvl level, cluster bool, partitions int) (*floor, error) {
	b, err := newBackend("floor", lvl, cluster)
	if err != nil {
		return nil, err
	}
	f := &floor{nats: b, parts: floorPartitions(partitions)}
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
	for _, sc := range floorStreams(f.parts) {
		sc.Retention, sc.Discard = jetstream.LimitsPolicy, jetstream.DiscardOld
		sc.Storage, sc.Replicas, sc.Duplicates, sc.MaxAge = jetstream.FileStorage, b.replicas, 2*time.Minute, 24*time.Hour
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			f.close()
			return nil, err
		}
	}
	for _, kc := range floorBuckets(f.parts) {
		kc.Storage, kc.Replicas = jetstream.FileStorage, b.replicas
		if _, err := js.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			f.close()
			return nil, err
		}
	}
	if cluster {
		if err := waitAllStreamLeaders(ctx, js); err != nil {
			f.close()
			return nil, err
		}
	}
	// Consumers of the buckets' streams act on one announced type and ack every other
	// revision unread (the pipeline's bus.ConsumerSpec.Records). Every stage consumes
	// every partition: one durable, pull loop and worker pool per partition's stream.
	type stage struct {
		name, stream, filter, recordType string
		h                                func(context.Context, *stageEnv, fmsg) error
	}
	stages := []stage{{"submit", "FLOOR_SUBMISSIONS", floorSubmit, "", stageSubmit}}
	for _, p := range f.parts {
		// A durable's name is its stage's on every partition's stream.
		stages = append(stages,
			stage{"gate", "KV_" + p.runsKV, p.runsSubj() + ">", floorTypeRecorded, stageGate},
			stage{"exec", "KV_" + p.callsKV, p.callsSubj() + floorTarget + ".>", floorTypeExec, stageExec},
			stage{"gate-outputs", "KV_" + p.callsKV, p.callsSubj() + ">", floorTypeOutput, stageGateNext},
			stage{"publisher", "KV_" + p.callsKV, p.callsSubj() + ">", floorTypeOutput, stagePublisher})
	}
	for _, st := range stages {
		sjs, err := conn("floor-" + st.name + "-" + st.stream)
		if err != nil {
			f.close()
			return nil, err
		}
		env := &stageEnv{js: sjs, nc: f.conns[len(f.conns)-1], parts: floorPartitions(partitions)}
		for i := range env.parts {
			p := &env.parts[i]
			if p.calls, err = sjs.KeyValue(ctx, p.callsKV); err == nil {
				p.runs, err = sjs.KeyValue(ctx, p.runsKV)
			}
			if err == nil {
				p.batches, err = sjs.KeyValue(ctx, p.batchesKV)
			}
			if err != nil {
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
					var perr error
					if st.recordType == "" || m.Headers().Get(floorTypeHeader) == st.recordType {
						var fm fmsg
						if fm, perr = parseFloor(string(m.Data())); perr == nil {
							perr = st.h(context.Background(), env, fm)
						}
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
	return fmt.Sprintf("%s.%s.%d.c%d", floorTarget, m.run, m.step, i)
}

// parseFloor reads a payload: a work message's, or a call record's (the payload, then
// floorStateSep and the record's state).
func parseFloor(s string) (fmsg, error) {
	s, _, _ = strings.Cut(s, floorStateSep)
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
	js    jetstream.JetStream
	nc    *nats.Conn
	parts []floorPart
}

// part is the partition that holds run's records.
func (e *stageEnv) part(run string) *floorPart { return &e.parts[partitionOf(run, len(e.parts))] }

// errFloorRunBusy is a run record that holds another open batch: the pipeline's run_busy.
var errFloorRunBusy = errors.New("floor: run holds another open batch")

// publish stores one message with its deterministic id and waits for the acknowledgement.
func (e *stageEnv) publish(ctx context.Context, subj, id, data string) error {
	return e.publishAll(ctx, []floorPub{{subj, id, data}})
}

type floorPub struct{ subj, id, data string }

// sendLive sends every message as a plain core NATS message (no stream stores its
// subject, nothing is acknowledged), as the pipeline's Publisher.PublishLive sends the
// live facts.
func (e *stageEnv) sendLive(msgs []floorPub) error {
	for _, p := range msgs {
		m := nats.NewMsg(p.subj)
		m.Data = []byte(p.data)
		m.Header.Set("ce-id", p.id)
		if err := e.js.Conn().PublishMsg(m); err != nil {
			return err
		}
	}
	return nil
}

// publishAll stores every message in one round trip (asynchronous publishes, then every
// acknowledgement), as the pipeline's Publisher.PublishAll.
func (e *stageEnv) publishAll(ctx context.Context, msgs []floorPub) error {
	fs := make([]jetstream.PubAckFuture, len(msgs))
	for i, p := range msgs {
		m := nats.NewMsg(p.subj)
		m.Data = []byte(p.data)
		m.Header.Set(jetstream.MsgIDHeader, p.id)
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

// writeRecord writes call record key of m's run with value by compare-and-swap at
// revision rev (0: a create), as one announced revision: the headers of the hand-off typ,
// as state.Store.WithAnnounce does (a publish on the key's subject expecting its last
// sequence; no message id).
func (e *stageEnv) writeRecord(ctx context.Context, m fmsg, key, value, typ string, rev uint64) error {
	return e.writeAnnounced(ctx, e.part(m.run).callsSubj()+key, value, typ, rev)
}

// writeAnnounced is writeRecord on the record subject subj of any bucket.
func (e *stageEnv) writeAnnounced(ctx context.Context, subj, value, typ string, rev uint64) error {
	m := nats.NewMsg(subj)
	m.Data = []byte(value)
	m.Header.Set(floorTypeHeader, typ)
	_, err := e.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
	var apiErr *jetstream.APIError
	if rev == 0 && errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return nil // created by an earlier delivery
	}
	return err
}

// readRun reads the run record: a direct get, which any replica may answer (the
// pipeline's ReadBatch and the first read of Store.Update).
func (e *stageEnv) readRun(ctx context.Context, m fmsg) (jetstream.KeyValueEntry, error) {
	return e.part(m.run).runs.Get(ctx, m.run)
}

// pauseRead is the gate's read of the tool's pause record from the leader of the pauses
// bucket's stream (pipeline.Env.ToolPaused, state.ReadFromLeader): a JetStream API
// message get; no record means not paused.
func (e *stageEnv) pauseRead(ctx context.Context) error {
	key := base64.RawURLEncoding.EncodeToString([]byte(floorTool))
	req, err := json.Marshal(map[string]string{"last_by_subj": "$KV." + floorPausesKV + "." + key})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := e.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET.KV_"+floorPausesKV, req)
	if err != nil {
		return err
	}
	var resp struct {
		Error *struct {
			Code int `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		return err
	}
	if resp.Error == nil || resp.Error.Code != 10037 { // JSNoMessageFoundErr: not paused
		return fmt.Errorf("floor: pause read: %s", r.Data)
	}
	return nil
}

// leaderGet reads the last message of a call record's subject from the leader of the
// stream of calls bucket callsKV (a JetStream API message get; state.ReadFromLeader).
func (e *stageEnv) leaderGet(ctx context.Context, callsKV, subject string) ([]byte, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": subject})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := e.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET.KV_"+callsKV, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *struct {
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil || resp.Message == nil {
		return nil, fmt.Errorf("floor: leader read of %s: %s", subject, r.Data)
	}
	return resp.Message.Data, nil
}

func ignoreExists(err error) error {
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return err
}

// openRun is the run record's value while it holds m's batch open: the relay's payload
// of its first call (what the gate reads from the revision that records it), then the
// state.
func openRun(m fmsg) string {
	m.index = 0
	return m.String() + floorStateSep + floorOpenPrefix + m.batch()
}

// stageSubmit is the batcher's submission (pipeline.Env.AcceptBatch): read the run
// record; archive the run's previous batch if the record still holds it (a create,
// refused when the publisher archived it first); claim the run and record the batch in
// one write, announced: that revision is the gate's work for the batch.
func stageSubmit(ctx context.Context, e *stageEnv, m fmsg) error {
	open := openRun(m)
	cur, err := e.readRun(ctx, m)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return e.writeAnnounced(ctx, e.part(m.run).runsSubj()+m.run, open, floorTypeRecorded, 0)
	case err != nil:
		return err
	case string(cur.Value()) == open: // a redelivery: the recording was the gate's work
		return nil
	case strings.Contains(string(cur.Value()), floorStateSep+floorOpenPrefix):
		return errFloorRunBusy
	}
	if prev, ok := strings.CutPrefix(string(cur.Value()), floorFinalPrefix); ok {
		if _, err := e.part(m.run).batches.Create(ctx, prev, []byte("finalized")); ignoreExists(err) != nil {
			return err
		}
	}
	return e.writeAnnounced(ctx, e.part(m.run).runsSubj()+m.run, open, floorTypeRecorded, cur.Revision())
}

// stageGate is the gate on a call to gate (services/gate: gateCall with assumeNew): the
// batch came in the revision that recorded it (its cache holds it for the rest), the
// tool's pause read, the call record created with the decision, Executing{1} and the
// input (announced: the executor request), then the audit copy, then the live tool_call
// fact (core NATS, not stored).
func stageGate(ctx context.Context, e *stageEnv, m fmsg) error {
	if err := e.pauseRead(ctx); err != nil {
		return err
	}
	key := m.call(m.index)
	if err := e.writeRecord(ctx, m, key, m.String()+floorStateSep+"executing", floorTypeExec, 0); err != nil {
		return err
	}
	if err := e.publish(ctx, e.part(m.run).auditSubj+m.run, key+":audit:allow", m.String()); err != nil {
		return err
	}
	return e.sendLive([]floorPub{{floorFacts + m.run, key + ":event:tool_call", m.String()}})
}

// stageExec is the executor (internal/execcore) on an announced executor request: read
// the call record, run the tool, and commit Completed by compare-and-swap (echo is
// replay_safe: no entered write on the first delivery), announced: that revision is the
// call's output.
func stageExec(ctx context.Context, e *stageEnv, m fmsg) error {
	key := m.call(m.index)
	cur, err := e.part(m.run).calls.Get(ctx, key)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(string(cur.Value()), floorStateSep+"executing") {
		return nil // completed by an earlier delivery
	}
	out := fmt.Sprintf("%s%sx%d", m.String(), floorStateSep, m.index) // the echo "tool"
	return e.writeRecord(ctx, m, key, out, floorTypeOutput, cur.Revision())
}

// stageGateNext is the gate's sequential dispatch (services/gate handleOutput): the
// terminal revision of call i gates call i+1, the batch from its cache.
func stageGateNext(ctx context.Context, e *stageEnv, m fmsg) error {
	if m.index+1 >= m.n {
		return nil
	}
	m.index++
	return stageGate(ctx, e, m)
}

// stagePublisher is the publisher's output handler (services/publisher: handleOutput,
// finalizeAndPublish): an output that is not the last reads the batch only when its
// cache does not hold it yet (the batch's first output); the last reads it fresh, reads
// the call records with one batch get, finalizes the batch and releases the run in one
// compare-and-swap on the run record, publishes the results message, sends the live
// tool_result facts (core NATS, not stored), and archives the batch.
func stagePublisher(ctx context.Context, e *stageEnv, m fmsg) error {
	if m.index != m.n-1 {
		if m.index == 0 {
			_, err := e.readRun(ctx, m)
			return err
		}
		return nil
	}
	if _, err := e.readRun(ctx, m); err != nil {
		return err
	}
	p := e.part(m.run)
	subjects := make([]string, m.n)
	for i := range m.n {
		subjects[i] = p.callsSubj() + m.call(i)
	}
	recs, err := jetstreamext.GetLastMsgsFor(ctx, e.js, "KV_"+p.callsKV, subjects)
	if err != nil {
		return err
	}
	outs := map[string]string{}
	for r, err := range recs {
		if err != nil {
			return err
		}
		_, out, _ := strings.Cut(string(r.Data), floorStateSep)
		outs[strings.TrimPrefix(r.Subject, p.callsSubj())] = out
	}
	results := make([]string, m.n)
	for i := range m.n {
		results[i] = outs[m.call(i)]
		if !strings.HasPrefix(results[i], "x") {
			// A replica behind the call's terminal write answered the batch get (on the
			// cluster): read it again from the stream leader, as the publisher does.
			data, err := e.leaderGet(ctx, p.callsKV, p.callsSubj()+m.call(i))
			if err != nil {
				return err
			}
			_, out, _ := strings.Cut(string(data), floorStateSep)
			if !strings.HasPrefix(out, "x") {
				return fmt.Errorf("floor: call %s is not terminal", m.call(i))
			}
			results[i] = out
		}
	}
	// Finalize and release: the Store.Update loop (read, then compare-and-swap).
	cur, err := e.readRun(ctx, m)
	if err != nil {
		return err
	}
	// A record that no longer holds this batch open was finalized by an earlier delivery
	// (and may hold the run's next batch by now): nothing to write.
	if string(cur.Value()) == openRun(m) {
		if _, err := p.runs.Update(ctx, m.run, []byte(floorFinalPrefix+m.batch()), cur.Revision()); err != nil {
			return err
		}
	}
	if err := e.publish(ctx, p.resultsSubj+m.run, m.batch()+":results", strings.Join(results, floorResultsSep)); err != nil {
		return err
	}
	facts := make([]floorPub, m.n)
	for i := range m.n {
		facts[i] = floorPub{floorFacts + m.run, m.call(i) + ":event:tool_result", "tool_result"}
	}
	if err := e.sendLive(facts); err != nil {
		return err
	}
	// The archive, after the results: a create, or — when the claim of the run's next
	// batch archived it first as finalized — the move to published.
	if _, err := p.batches.Create(ctx, m.batch(), []byte("published")); !errors.Is(err, jetstream.ErrKeyExists) {
		return err
	}
	a, err := p.batches.Get(ctx, m.batch())
	if err != nil || string(a.Value()) == "published" {
		return err
	}
	_, err = p.batches.Update(ctx, m.batch(), []byte("published"), a.Revision())
	return err
}

func (f *floor) run(ctx context.Context, runID string, step int64, n int) ([]string, error) {
	m := fmsg{runID, step, 0, n}
	// Like the pipeline's client (SubmitAndWait): its rejections, and the stream's
	// republication of what it stored.
	rej, err := f.nc.Subscribe(floorRejected, func(*nats.Msg) {})
	if err != nil {
		return nil, err
	}
	defer rej.Unsubscribe()
	ch := make(chan *nats.Msg, 1)
	sub, err := f.nc.ChanSubscribe(floorCommitted+m.run, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := (&stageEnv{js: f.js}).publish(ctx, floorSubmit, m.batch(), m.String()); err != nil {
		return nil, err
	}
	for {
		select {
		case r := <-ch:
			if r.Header.Get(jetstream.MsgIDHeader) != m.batch()+":results" {
				continue // a re-publication of an earlier batch of the run
			}
			return strings.Split(string(r.Data), floorResultsSep), nil
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
