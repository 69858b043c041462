package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

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
		e, err := cloudevent.NewEvent(fmt.Sprintf("op-%d", i), "bench", testType, map[string]int{"i": i})
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
