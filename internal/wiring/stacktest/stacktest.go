// Package stacktest starts stacks of awaken services (internal/wiring/app) in tests: the
// services a test names, on the test's own embedded JetStream server, each connected
// in-process, logging to the test, stopped gracefully when the test ends, and started again
// on the same server when the test restarts them. A harness built on it keeps only what is
// its own: its configuration, tokens, HTTP client and reads. [Park] takes a batch to the
// ticket one of its calls waits on, on any deployment's client. Only tests import it.
//
// It builds on [app.Start], not on internal/wiring/app/embedded: an embedded stack owns its
// server and shuts it down when it stops, while these tests stop, kill and start services
// on a server that stays, read it through a client of their own, and keep its store in the
// test's temporary directory ([natstest.Start]).
package stacktest

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// StartTimeout is a bound for the start of a stack, for a harness that has no deadline of
// its own: generous, for a loaded 2-core machine under the race detector.
const StartTimeout = 2 * time.Minute

// StopTimeout bounds a graceful stop of a stack, at a restart and at the end of a test.
const StopTimeout = servicerun.DefaultStopTimeout

// Logger is the base logger of a stack in a test: to tb's log at the level
// [servicetest.LogEnv] names, and silent when it is unset, since a stack logs a lot and a
// passing test stays quiet.
func Logger(tb testing.TB) zerolog.Logger {
	return servicerun.NewLogger(servicetest.LogWriter(tb), os.Getenv(servicetest.LogEnv))
}

// Server is a test's embedded JetStream server, which outlives the stacks the test starts
// on it, and a client of it.
type Server struct {
	NATS *natstest.Server
	tb   testing.TB
	// Client is an awaken client on NC.
	Client *client.Client
	// NC and JS are the client's connection, for the reads a test makes itself; they
	// reconnect across [natstest.Server.Restart].
	NC *nats.Conn
	JS jetstream.JetStream
}

// NewServer starts an embedded server for tb ([natstest.Start]: its store in tb's
// temporary directory, shut down when tb ends) and connects a client to it.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{NATS: natstest.Start(tb), tb: tb}
	s.NC, s.JS = s.NATS.Conn(tb)
	c, err := client.New(s.NC)
	if err != nil {
		tb.Fatalf("stacktest: client: %v", err)
	}
	s.Client = c
	return s
}

// URL is the server's client URL, for a command or a process under test (stable across
// [natstest.Server.Restart]).
func (s *Server) URL() string { return s.NATS.URL() }

// Stack is the services one [Server.StartStack] started, which the test may stop and
// start again with the same options. It is not safe to restart it while other goroutines
// use it.
type Stack struct {
	*app.Stack
	server *Server
	opts   app.Options
}

// StartStack starts the services o names (the pipeline's five when it names none) on the
// server and fails the test if they do not start; ctx bounds the start only, not the
// services. Each service is dialled in-process and logs through [Logger] (o.Dial and o.Log
// are set here); the api, when named, serves its HTTP on a free loopback port unless
// o.API.HTTPAddr names one. The stack is stopped gracefully when the test ends, before the
// server, and a stop that fails fails the test.
func (s *Server) StartStack(ctx context.Context, o app.Options) *Stack {
	s.tb.Helper()
	st, err := s.TryStartStack(ctx, o)
	if err != nil {
		s.tb.Fatalf("stacktest: start %v: %v", o.Services, err)
	}
	return st
}

// TryStartStack is [Server.StartStack] for a test of a start that must fail: it returns
// the start's error instead of failing the test. A stack that does start is stopped when
// the test ends all the same.
func (s *Server) TryStartStack(ctx context.Context, o app.Options) (*Stack, error) {
	s.tb.Helper()
	if slices.Contains(o.Services, contracts.ServiceAPI) && o.API.HTTPAddr == "" {
		o.API.HTTPAddr = "127.0.0.1:0"
	}
	o.Log = Logger(s.tb)
	if o.OnHandOffMismatch == nil {
		tb := s.tb
		o.OnHandOffMismatch = func(m pipeline.HandOffMismatch) { tb.Errorf("hand-off mismatch: %v", m) }
	}
	st := &Stack{server: s, opts: o}
	return st, st.start(ctx)
}

// StartAgain starts the stack's services again with the same options, after
// [Stack.StopCleanly] or a Kill (a crash of every service); ctx bounds the start.
func (st *Stack) StartAgain(ctx context.Context) {
	tb := st.server.tb
	tb.Helper()
	if err := st.start(ctx); err != nil {
		tb.Fatalf("stacktest: start %v: %v", st.opts.Services, err)
	}
}

// start starts the stack's services with its options and stops them when the test ends.
func (st *Stack) start(ctx context.Context) error {
	o := st.opts
	// Dialled now: a restarted server (natstest.Server.Restart) is a new one.
	o.Dial = servicerun.InProcessDialer(st.server.NATS.Server())
	started, err := app.Start(ctx, o)
	if err != nil {
		return err
	}
	natstest.StopAtCleanup(st.server.tb, "stack", StopTimeout, started.Stop)
	st.Stack = started
	return nil
}

// StopCleanly stops the services gracefully, as a SIGTERM would, and fails the test
// unless every one of them stopped cleanly within [StopTimeout].
func (st *Stack) StopCleanly() {
	tb := st.server.tb
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	if err := st.Stop(ctx); err != nil {
		tb.Fatalf("stacktest: stop %v: %v", st.opts.Services, err)
	}
}

// Restart stops the services gracefully ([Stack.StopCleanly]) and starts them again with
// the same options on the same server; ctx bounds the start.
func (st *Stack) Restart(ctx context.Context) {
	st.server.tb.Helper()
	st.StopCleanly()
	st.StartAgain(ctx)
}

// Ledger is how many times the body of operation (run, step, callID) has started, by the
// body-run ledger (the configuration must turn executors.body_ledger on); a ledger that
// cannot be read fails the test.
func (st *Stack) Ledger(run string, step int64, callID string) int {
	tb := st.server.tb
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	counters, err := st.Env.OpenCounters(ctx)
	if err != nil {
		tb.Fatalf("stacktest: ledger: %v", err)
	}
	n, err := execcore.ReadCounter(ctx, counters, execcore.LedgerKey(run, step, callID))
	if err != nil {
		tb.Fatalf("stacktest: ledger: %v", err)
	}
	return int(n)
}

// ledgerTimeout bounds one read of the body-run ledger.
const ledgerTimeout = 10 * time.Second

// Park submits sub through c and waits until its call callID waits on a resume ticket (an
// approval to give, a client-executed call to complete), and returns the ticket; ctx
// bounds both, and a failure of either fails tb.
func Park(tb testing.TB, ctx context.Context, c *client.Client, sub contracts.BatchSubmission, callID string) contracts.ResumeTicket {
	tb.Helper()
	if _, err := c.Submit(ctx, sub); err != nil {
		tb.Fatalf("stacktest: submit %s: %v", sub.BatchID(), err)
	}
	tk, err := c.WaitTicket(ctx, sub.RunID, sub.Step, callID)
	if err != nil {
		tb.Fatalf("stacktest: the ticket of call %s of %s: %v", callID, sub.BatchID(), err)
	}
	return tk
}
