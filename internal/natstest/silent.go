package natstest

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// Silence subscribes nc to subject (wildcards allowed) and never answers, until tb ends:
// a request or a JetStream publish there is received and left without a reply, as a
// stream leader that stops after receiving it would leave it. The subscription is in
// place on the server when Silence returns.
func Silence(tb testing.TB, nc *nats.Conn, subject string) {
	tb.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		tb.Fatalf("natstest: subscribe to %s: %v", subject, err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		tb.Fatalf("natstest: flush: %v", err)
	}
}
