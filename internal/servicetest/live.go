package servicetest

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
)

// Live records the messages sent on a subject no stream stores (the live facts), from the
// moment it subscribed: a test reads what was sent with [Live.Events], as it reads a
// stream's messages with [Kit.Messages].
type Live struct {
	tb      testing.TB
	nc      *nats.Conn
	mu      sync.Mutex
	subject string
	events  []Stored
}

// Listen subscribes nc to subject (a subject or a wildcard) from now on: the subscription
// is in place when it returns, and ends with tb.
func Listen(tb testing.TB, nc *nats.Conn, subject string) *Live {
	tb.Helper()
	l := &Live{tb: tb, nc: nc, subject: subject}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil {
			tb.Errorf("live message on %s is not a CloudEvent: %v", m.Subject, err)
			return
		}
		l.mu.Lock()
		l.events = append(l.events, Stored{Subject: m.Subject, Header: m.Header, Event: ev})
		l.mu.Unlock()
	})
	if err != nil {
		tb.Fatalf("subscribe to %s: %v", subject, err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return l
}

// Events returns what was heard on subject (exact; "" for everything heard), in order.
// Every message published on the connection listened on before the call — the one the
// services of a [Kit] send theirs on — has been heard: the server answers the flush after
// delivering them, and the barrier runs once the handler has taken each one.
func (l *Live) Events(subject string) []Stored {
	l.tb.Helper()
	if err := l.nc.Flush(); err != nil {
		l.tb.Fatal(err)
	}
	done := make(chan struct{})
	if err := l.nc.Barrier(func() { close(done) }); err != nil {
		l.tb.Fatal(err)
	}
	<-done
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Stored
	for _, m := range l.events {
		if subject == "" || m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}
