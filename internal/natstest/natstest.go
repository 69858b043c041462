// Package natstest runs an embedded JetStream server for tests: one per test, in the
// test's temporary directory, on a random port, shut down by the test's cleanup. It can be
// restarted on the same store and port to test crash recovery, and offers WaitFor, the
// polling helper every test uses instead of sleeping.
package natstest

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/testnet"
)

// connectTimeout bounds the first connection of a test client.
const connectTimeout = 10 * time.Second

// Server is an embedded JetStream server owned by one test. Its methods are safe for
// concurrent use.
type Server struct {
	mu   sync.Mutex
	srv  *server.Server
	dir  string
	port int
}

// Start starts a server for tb with its store in tb.TempDir(), no signal handlers, no
// logging and a random port; tb's cleanup shuts it down.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{dir: tb.TempDir(), port: -1}
	s.start(tb)
	tb.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		natsserver.Shutdown(s.srv)
	})
	return s
}

func (s *Server) start(tb testing.TB) {
	tb.Helper()
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{
		StoreDir:   s.dir,
		Port:       s.port,
		ServerName: "natstest",
		NoLog:      true,
	})
	if err != nil {
		tb.Fatalf("natstest: start server: %v", err)
	}
	if addr, ok := srv.Addr().(*net.TCPAddr); ok {
		s.port = addr.Port // a restart reuses the port so clients reconnect to it
	}
	s.srv = srv
}

// URL is the client URL of the server (stable across Restart).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv.ClientURL()
}

// Server returns the running nats-server (a new one after Restart).
func (s *Server) Server() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Conn connects a client with the production reconnect settings of [bus.Connect], so it
// survives Restart. tb's cleanup closes it.
func (s *Server) Conn(tb testing.TB) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	nc, js, err := bus.Connect(ctx, s.URL(), tb.Name())
	if err != nil {
		tb.Fatalf("natstest: connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc, js
}

// Restart shuts the server down, as a crash of the NATS host would, and starts a new one
// on the same store directory and port. Clients from Conn reconnect by themselves.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	natsserver.Shutdown(s.srv)
	s.start(tb)
}

// pollInterval is short so tests react quickly; conditions are cheap reads.
const pollInterval = 10 * time.Millisecond

// WaitFor polls cond every few milliseconds until it returns true, failing tb with msg if
// it is still false after timeout. Use it instead of sleeping.
func WaitFor(tb testing.TB, timeout time.Duration, cond func() bool, msg string) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: timed out after %s waiting for %s", timeout, msg)
			return // Fatalf does not return on a real testing.TB; this is for fakes
		}
		<-t.C
	}
}

// FreeLoopbackAddr is [testnet.FreePort] as "127.0.0.1:PORT", for a
// process under test that takes its listen addresses as flags.
func FreeLoopbackAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testnet.FreePort(tb)))
}
