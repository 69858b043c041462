package servicetest

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Rejections subscribes nc to the batch rejections on names' rejected subject from now on
// (the subscription is in place when it returns) and hands each one on, decoded from its
// CloudEvent in either mode, on the channel it returns; the subscription ends with tb. The
// channel holds 64: a test that lets more pile up stalls the subscription.
func Rejections(tb testing.TB, nc *nats.Conn, names contracts.Names) <-chan contracts.BatchRejected {
	tb.Helper()
	out := make(chan contracts.BatchRejected, 64)
	sub, err := nc.Subscribe(names.RejectedSubject(), func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil {
			return
		}
		var r contracts.BatchRejected
		if json.Unmarshal(ev.Data, &r) == nil {
			out <- r
		}
	})
	if err != nil {
		tb.Fatalf("subscribe to %s: %v", names.RejectedSubject(), err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return out
}
