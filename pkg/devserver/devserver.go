// Package devserver runs a whole awaken deployment inside the calling process, for the
// tests of a platform's own module: an embedded JetStream server on a free loopback port
// (store in a temporary directory), the five pipeline services and the api, all stock.
// A test of a custom executor leaves the Brain executor out ([Options.WithoutBrainExec])
// and runs its own against [Server.URL]; no Docker engine is needed.
//
//	srv, err := devserver.Start(ctx, devserver.Options{ConfigYAML: cfg, WithoutBrainExec: true})
//	defer srv.Close()
//	res, err := srv.Client.SubmitAndWait(ctx, batch)
//
// In a test, [StartTest] does the same in one line and closes the deployment when the test
// ends:
//
//	srv := devserver.StartTest(t, devserver.Options{ConfigYAML: cfg})
//
// It links nats-server; production binaries use pkg/client and pkg/executor, which do not.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/app/embedded"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Options configures [Start].
type Options struct {
	// ConfigYAML is the host configuration every service loads (required).
	ConfigYAML []byte
	// ConfigDir is the directory relative paths of the configuration resolve against
	// (sandbox modules, MCP commands); default the working directory.
	ConfigDir string
	// WithoutBrainExec leaves the Brain executor out, so a custom one can serve.
	WithoutBrainExec bool
	// WithAPI also runs the api's micro service (no HTTP listener).
	WithAPI bool
	// Log receives the services' JSON log; nil discards it.
	Log io.Writer
}

// Server is a running deployment.
type Server struct {
	// URL is the NATS client URL (nats://127.0.0.1:port), without credentials.
	URL string
	// Client is a platform client connected to URL; Close closes it.
	Client *client.Client

	stack *app.Stack
	dir   string
}

// Start starts the server and the services and returns once they consume.
func Start(ctx context.Context, o Options) (s *Server, err error) {
	cfg, err := config.Parse(o.ConfigYAML)
	if err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	cfg.Dir = o.ConfigDir
	dir, err := os.MkdirTemp("", "awaken-devserver-")
	if err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	s = &Server{dir: dir}
	defer func() {
		if err != nil {
			_ = s.Close()
			s = nil
		}
	}()
	services := app.AllServices()
	if o.WithoutBrainExec {
		services = slices.DeleteFunc(services, func(n string) bool { return n == contracts.ServiceBrainExec })
	}
	if o.WithAPI {
		services = append(services, contracts.ServiceAPI)
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	if s.stack, err = embedded.Start(ctx, app.Options{Config: cfg, Services: services, Log: servicerun.NewLogger(log, "info")},
		embedded.Options{Server: natsserver.EmbeddedConfig{StoreDir: dir, Port: -1, NoLog: true}}); err != nil {
		return s, fmt.Errorf("devserver: %w", err)
	}
	s.URL = s.stack.URL()
	if s.Client, err = client.Dial(s.URL, client.WithPrefix(cfg.Prefix)); err != nil {
		return s, fmt.Errorf("devserver: %w", err)
	}
	return s, nil
}

// testStartTimeout bounds the start of [StartTest]: the embedded server, the streams and
// buckets, and every service consuming (under the race detector on a busy machine, tens
// of seconds).
const testStartTimeout = 2 * time.Minute

// StartTest is [Start] for the test tb: the deployment must start within two minutes (and
// before tb's deadline), a start that fails fails tb, and the deployment closes when tb
// ends — a failed close is a test error.
func StartTest(tb testing.TB, o Options) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), testStartTimeout)
	defer cancel()
	s, err := Start(ctx, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("devserver: close: %v", err)
		}
	})
	return s
}

// Close drains the services, stops the server (the stack's Stop does both) and removes
// its store.
func (s *Server) Close() error {
	var errs []error
	if s.Client != nil {
		if err := s.Client.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.stack != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, s.stack.Stop(ctx))
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}
