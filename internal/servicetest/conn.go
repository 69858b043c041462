package servicetest

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// Connect connects to the server at url with opts (a user's credentials, say), fails tb
// when it cannot, and closes the connection when tb ends: a client of a server the test
// did not start itself (a compose deployment, an `awaken dev`, a secure embedded server).
func Connect(tb testing.TB, url string, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatalf("connect to %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}
