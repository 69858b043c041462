package servicetest

import (
	"context"
	"slices"
	"testing"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
)

// Stopper is a running service: every pipeline service stops gracefully with Stop.
type Stopper interface{ Stop(context.Context) error }

// Service says how a test starts one pipeline service, of type S with start options O, on
// a harness's environment.
type Service[S Stopper, O any] struct {
	// Name is the service's name: the environment's Service, and the only service the
	// fault hook expects to be called by.
	Name string
	// Start starts one replica on env; the service's own Start fits as it is.
	Start func(ctx context.Context, env *pipeline.Env, opts ...O) (S, error)
	// Defaults are the options of every start, before the test's own (e.g. a fast
	// redelivery, so a failed handler is retried within the test's waits).
	Defaults []O
}

// Harness is a [Kit] and the replicas of one service a test runs on it: the one harness
// of every pipeline service's tests, each of which keeps only its own helpers around it.
type Harness[S Stopper, O any] struct {
	*Kit
	// Svc is the first replica started (the zero S before any).
	Svc     S
	started bool
	service Service[S, O]
}

// Option sets up a harness.
type Option func(*setup)

type setup struct {
	config   string
	topology bus.TopologyConfig
	stopped  bool
}

// WithConfig sets the trusted host configuration (YAML; [PipelineConfig] by default).
func WithConfig(yaml string) Option { return func(s *setup) { s.config = yaml } }

// WithTopology sets the topology configuration (e.g. a short duplicate window); memory
// storage is always used.
func WithTopology(topo bus.TopologyConfig) Option { return func(s *setup) { s.topology = topo } }

// Stopped leaves the service stopped: the test sets up state first, or starts it with
// options of its own ([Harness.StartReplica]).
func Stopped() Option { return func(s *setup) { s.stopped = true } }

// Start starts a server with the awaken topology, builds the environment of the
// configuration for svc and, unless [Stopped], starts one replica of svc with its default
// options. Every replica is stopped when the test ends, before the server goes away.
func Start[S Stopper, O any](t *testing.T, svc Service[S, O], opts ...Option) *Harness[S, O] {
	t.Helper()
	s := setup{config: PipelineConfig}
	for _, o := range opts {
		o(&s)
	}
	h := &Harness[S, O]{Kit: New(t, svc.Name, s.config, s.topology), service: svc}
	if !s.stopped {
		h.StartReplica()
	}
	return h
}

// StartReplica starts a replica of the service with its default options and then opts
// (call it again for another replica on the same durable consumers), under a context that
// outlives the test's so only the cleanup stops it, and fails the test if it does not
// start. The first replica becomes [Harness.Svc].
func (h *Harness[S, O]) StartReplica(opts ...O) S {
	h.T.Helper()
	svc, err := h.service.Start(context.WithoutCancel(h.Ctx), h.Env, append(slices.Clone(h.service.Defaults), opts...)...)
	if err != nil {
		h.T.Fatalf("start %s: %v", h.service.Name, err)
	}
	natstest.StopAtCleanup(h.T, h.service.Name, WaitTimeout, svc.Stop)
	if !h.started {
		h.Svc, h.started = svc, true
	}
	return svc
}

// In returns a view of h that reports failures to t (a subtest); the service, its
// replicas and the fault rules are shared.
func (h *Harness[S, O]) In(t *testing.T) *Harness[S, O] {
	v := *h
	v.Kit = h.Kit.In(t)
	return &v
}
