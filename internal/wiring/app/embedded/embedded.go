// Package embedded runs a stack of internal/wiring/app on an embedded JetStream server it
// starts itself, the one assembly `awaken dev` (internal/wiring/devstack) and pkg/devserver
// build on. It is apart from internal/wiring/app so that what runs one service against a
// NATS URL (the service subcommands, pkg/executor) does not link nats-server.
package embedded

import (
	"context"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/wiring/app"
)

// Options configures the server of [Start].
type Options struct {
	// Server configures the embedded server (StoreDir is required).
	Server natsserver.EmbeddedConfig
	// Before, when set, runs with the started server before any service connects: `awaken
	// dev --secure` creates the streams and buckets there as the admin user, since its
	// services may not. An error shuts the server down and aborts the start.
	Before func(ctx context.Context, srv *server.Server) error
	// Login, when set, adds options to the in-process connection of each service, by dial
	// name ("awaken-<service>"): its user, password and inbox prefix when the server runs
	// with the accounts of deploy/nats/auth.conf. Unused when app.Options.Dial is set.
	Login func(name string) []nats.Option
}

// ServerError is the error of [Start] when the embedded server did not start, so that a
// caller can explain it (`awaken dev` checks whether its address was taken meanwhile).
type ServerError struct{ Err error }

func (e *ServerError) Error() string { return e.Err.Error() }

func (e *ServerError) Unwrap() error { return e.Err }

// Start starts the embedded server, runs e.Before on it, then starts the stack of o with
// every service connected in-process (o.Dial, when set, still decides). The stack owns the
// server: [app.Stack.Stop] shuts it down after draining the services, and
// [app.Stack.URL] is its client URL. On error nothing is left running.
func Start(ctx context.Context, o app.Options, e Options) (*app.Stack, error) {
	srv, err := natsserver.StartEmbedded(e.Server)
	if err != nil {
		return nil, &ServerError{Err: err}
	}
	if e.Before != nil {
		if err := e.Before(ctx, srv); err != nil {
			natsserver.Shutdown(srv)
			return nil, err
		}
	}
	if o.Dial == nil {
		o.Dial = inProcessDialer(srv, e.Login)
	}
	o.Server = owned{srv}
	st, err := app.Start(ctx, o)
	if err != nil {
		// Start stops what it started, the server included, except when it refused the
		// options before starting anything; shutting down twice is harmless.
		natsserver.Shutdown(srv)
		return nil, err
	}
	return st, nil
}

// inProcessDialer connects each service through the server's in-process pipe, as
// [servicerun.InProcessDialer], with the options login gives for it.
func inProcessDialer(srv *server.Server, login func(name string) []nats.Option) func(name string) (*nats.Conn, error) {
	if login == nil {
		return servicerun.InProcessDialer(srv)
	}
	return func(name string) (*nats.Conn, error) {
		// app.Start names the service when a connection fails.
		return nats.Connect("", append([]nats.Option{nats.InProcessServer(srv), nats.Name(name), nats.MaxReconnects(-1)}, login(name)...)...)
	}
}

// owned is the server as the stack shuts it down: waiting until it has, so that its store
// can be reopened at once.
type owned struct{ srv *server.Server }

func (s owned) ClientURL() string { return s.srv.ClientURL() }

func (s owned) Shutdown() { natsserver.Shutdown(s.srv) }
