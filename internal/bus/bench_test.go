package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func BenchmarkEncodeMsg(b *testing.B) {
	e := sampleEvent()
	b.ReportAllocs()
	for b.Loop() {
		_ = bus.EncodeMsg("awaken.work.gate.run-7", e)
	}
}

func BenchmarkDecodeMsgBinary(b *testing.B) {
	m := bus.EncodeMsg("awaken.work.gate.run-7", sampleEvent())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bus.DecodeMsg(m.Header, m.Data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMsgStructured(b *testing.B) {
	h := map[string][]string{"Content-Type": {"application/cloudevents+json"}}
	body := []byte(`{"specversion":"1.0","id":"i-1","source":"platform/x","type":"io.awaken.toolbatch.requested.v1","time":"2026-01-02T03:04:05Z","data":{"run_id":"run-7","step":3}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bus.DecodeMsg(h, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConsume measures the consume loop end to end (pull, decode, handler, DoubleAck)
// on an embedded server: one op is one message settled.
func BenchmarkConsume(b *testing.B) {
	srv := natstest.Start(b)
	_, js := srv.Conn(b)
	ctx := context.Background()
	names := contracts.NewNames("")
	if err := bus.EnsureTopology(ctx, js, names, bus.TopologyConfig{}); err != nil {
		b.Fatal(err)
	}
	ensureTestStream(b, ctx, js, names)
	pub := bus.NewPublisher(js)
	out := make([]bus.Outgoing, b.N)
	for i := range out {
		e, err := bus.NewEvent(fmt.Sprintf("op-%d", i), "bench", testType, map[string]int{"i": i})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = bus.Outgoing{Subject: testSubject(names, "run-1"), Event: e}
	}
	if err := pub.PublishAll(ctx, out); err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	all := make(chan struct{})
	b.ResetTimer()
	sub, err := bus.Consume(ctx, js, bus.ConsumerSpec{
		Stream: testStream(names), Durable: "bench", Workers: 4, Names: names,
	}, func(context.Context, bus.Delivery) error {
		if handled.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	<-all
	b.StopTimer()
	if err := sub.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}
