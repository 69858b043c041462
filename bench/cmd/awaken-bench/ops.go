package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// opsPayload is the size of every message and value the ops row writes: about a call
// record's.
const opsPayload = 512

// opsBlock is how many of one operation the ops row times in a row (see measureOps).
const opsBlock = 10

// opsBatchSizes are the atomic batch publishes the ops row times.
var opsBatchSizes = []int{1, 2, 10}

// opStat is the latency of one JetStream operation, done one at a time.
type opStat struct {
	Op       string  `json:"op"`
	N        int     `json:"n"`
	MedianMs float64 `json:"median_ms"`
	P99Ms    float64 `json:"p99_ms"`
	// InPublishes is the median over the median of one plain publish on the same row:
	// the unit of the study ("PE"), comparable across rows and machines.
	InPublishes float64 `json:"median_in_publishes"`
}

// ops times single JetStream operations on the row's server(s), each one at a time, with
// its streams and bucket at the backend's replicas: what each write of the pipeline costs
// there. On one node an atomic batch is staged in a temporary on-disk store with synced
// flushes (about 13 publishes whatever its size, by the study of issue 26); in a cluster
// the staging is in memory, so its cost is measured here rather than assumed.
type ops struct {
	nats *backend
	nc   *nats.Conn
	js   jetstream.JetStream
	kv   jetstream.KeyValue
}

func newOps(ctx context.Context, lvl level, cluster bool) (*ops, error) {
	b, err := newBackend("ops", lvl, cluster)
	if err != nil {
		return nil, err
	}
	o := &ops{nats: b}
	if o.nc, err = b.dial("bench-ops"); err == nil {
		o.js, err = jetstream.New(o.nc)
	}
	if err == nil {
		// As the pipeline's results stream: file storage, deduplication, atomic publish.
		_, err = o.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: "OPS", Subjects: []string{"ops.>"}, Storage: jetstream.FileStorage, Replicas: b.replicas,
			Duplicates: 2 * time.Minute, AllowAtomicPublish: true,
		})
	}
	if err == nil {
		o.kv, err = o.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: "OPS", History: 1, Storage: jetstream.FileStorage, Replicas: b.replicas,
		})
	}
	if err == nil && cluster {
		err = waitAllStreamLeaders(ctx, o.js)
	}
	if err != nil {
		o.close()
		return nil, err
	}
	return o, nil
}

func (o *ops) servers() []*server.Server { return o.nats.nodes }

func (o *ops) close() {
	if o.nc != nil {
		o.nc.Close()
	}
	o.nats.stop()
}

// measureOps times each operation s.Iters1 times after s.Warmup untimed ones: a plain
// publish (with a message id, as every pipeline publish has), a KV get, a KV
// compare-and-swap update, and an atomic batch publish of each of opsBatchSizes.
func measureOps(ctx context.Context, o *ops, s settings, res *result) error {
	payload := make([]byte, opsPayload)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	var seq int
	id := func() string { seq++; return fmt.Sprintf("op-%d", seq) }
	rev, err := o.kv.Put(ctx, "k", payload)
	if err != nil {
		return err
	}
	type op struct {
		name string
		do   func(ctx context.Context) error
	}
	list := []op{
		{"publish", func(ctx context.Context) error {
			_, err := o.js.Publish(ctx, "ops.publish", payload, jetstream.WithMsgID(id()))
			return err
		}},
		{"kv get", func(ctx context.Context) error {
			_, err := o.kv.Get(ctx, "k")
			return err
		}},
		{"kv update", func(ctx context.Context) error {
			r, err := o.kv.Update(ctx, "k", payload, rev)
			if err == nil {
				rev = r
			}
			return err
		}},
	}
	for _, n := range opsBatchSizes {
		list = append(list, op{fmt.Sprintf("atomic batch of %d", n), func(ctx context.Context) error {
			msgs := make([]*nats.Msg, n)
			for i := range msgs {
				// nats.NewMsg: the batch helper writes headers, and a nil header panics.
				m := nats.NewMsg("ops.batch")
				m.Data = payload
				m.Header.Set(jetstream.MsgIDHeader, id())
				msgs[i] = m
			}
			ack, err := jetstreamext.PublishMsgBatch(ctx, o.js, msgs)
			if err == nil && ack.BatchSize != uint64(n) {
				err = fmt.Errorf("atomic batch of %d: acknowledged %d", n, ack.BatchSize)
			}
			return err
		}})
	}
	timed := func(x op) (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		err := x.do(cctx)
		if err != nil {
			err = fmt.Errorf("%s: %w", x.name, err)
		}
		return time.Since(start), err
	}
	for _, x := range list {
		for range s.Warmup {
			if _, err := timed(x); err != nil {
				return err
			}
		}
	}
	// Blocks of opsBlock of each operation in turn: a change of the machine's load during
	// the row weighs on every operation alike, and only the first of a block follows
	// another kind of operation (whose leftovers, such as an atomic batch's on-disk
	// staging being removed, would otherwise slow the next one down).
	lat := make([][]time.Duration, len(list))
	for done := 0; done < s.Iters1; done += opsBlock {
		for j, x := range list {
			for range min(opsBlock, s.Iters1-done) {
				d, err := timed(x)
				if err != nil {
					return err
				}
				lat[j] = append(lat[j], d)
			}
		}
	}
	for j, x := range list {
		st := percentiles(lat[j])
		res.Ops = append(res.Ops, opStat{Op: x.name, N: st.N, MedianMs: st.MedianMs, P99Ms: st.P99Ms})
	}
	if unit := res.Ops[0].MedianMs; unit > 0 {
		for i := range res.Ops {
			res.Ops[i].InPublishes = res.Ops[i].MedianMs / unit
		}
	}
	return nil
}
