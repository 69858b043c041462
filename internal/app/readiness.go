package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/health"
)

// Readiness is what /readyz reports for one process: every NATS connection the process
// made is connected, and its services are started — which [Start] returns only after the
// streams and buckets were ensured (or found, with [Options.NoEnsure]) and every durable
// consumer was bound. It is safe for concurrent use.
type Readiness struct {
	mu      sync.Mutex
	conns   []*nats.Conn
	started bool
}

// Dial wraps dial so that every connection it makes is watched by the "nats" check.
func (r *Readiness) Dial(dial func(name string) (*nats.Conn, error)) func(name string) (*nats.Conn, error) {
	return func(name string) (*nats.Conn, error) {
		nc, err := dial(name)
		if err == nil {
			r.mu.Lock()
			r.conns = append(r.conns, nc)
			r.mu.Unlock()
		}
		return nc, err
	}
}

// SetStarted marks the services started; false marks them stopping, so an orchestrator
// stops routing to a draining process before it exits.
func (r *Readiness) SetStarted(started bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = started
}

// Register adds the checks "services" and "nats" to h.
func (r *Readiness) Register(h *health.Server) {
	h.AddCheck("services", r.checkStarted)
	h.AddCheck("nats", r.checkConns)
}

func (r *Readiness) checkStarted(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return errors.New("not started (waiting for NATS, the streams, or the consumers) or stopping")
	}
	return nil
}

func (r *Readiness) checkConns(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.conns) == 0 {
		return errors.New("no NATS connection yet")
	}
	var errs []error
	for _, nc := range r.conns {
		if st := nc.Status(); st != nats.CONNECTED {
			errs = append(errs, fmt.Errorf("connection %s is %s", nc.Opts.Name, st))
		}
	}
	return errors.Join(errs...)
}
