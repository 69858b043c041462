// Package app wires the awaken services together: one service against a NATS URL (the
// per-service subcommands and containers), or all of them on an embedded JetStream server
// (internal/wiring/app/embedded starts one for `awaken dev` and pkg/devserver; the
// end-to-end tests bring their own). It is the only package that imports every service; the
// services never import each other. internal/servicerun runs what it wires. It does not
// link nats-server.
package app

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
	"github.com/awaken-dev/awaken/services/batcher"
	brainexec "github.com/awaken-dev/awaken/services/brain-exec"
	"github.com/awaken-dev/awaken/services/gate"
	"github.com/awaken-dev/awaken/services/publisher"
	sandboxexec "github.com/awaken-dev/awaken/services/sandbox-exec"
)

// AllServices returns the five services in start order ([contracts.PipelineServices]).
func AllServices() []string { return contracts.PipelineServices() }

// Options configures a [Stack].
type Options struct {
	// Config is the host configuration (required).
	Config *config.Config
	// Services to start (default: all five), started in the order of [AllServices] with
	// the api last.
	Services []string
	// Dial returns a new connection for a service; each service gets its own so drains
	// and connection names stay per service, as in separate processes.
	Dial func(name string) (*nats.Conn, error)
	// Log is the base logger.
	Log zerolog.Logger
	// Faults is the test-only fault hook (nil in production).
	Faults pipeline.FaultHook
	// OnHandOffMismatch, when set, is told of every commit that handed work to other
	// consumers than its writer named (test-only: tests fail on it; nil in production).
	OnHandOffMismatch func(pipeline.HandOffMismatch)
	// Now, when set, is every service's clock (test-only, like Faults; nil in production).
	Now func() time.Time
	// BrainRegistry replaces the builtin example tools (platform teams bring their own).
	BrainRegistry *toolreg.Registry
	// BrainBuiltins adds the builtin example tools to BrainRegistry as well (they need the
	// service's environment, so they are registered when brain-exec starts).
	BrainBuiltins bool
	// Topology overrides the stream settings (replicas, storage).
	Topology *bus.TopologyConfig
	// API configures the api service when Services names [contracts.ServiceAPI].
	API api.Options
	// Metrics is the process's Prometheus registry; nil creates one per Stack. Every
	// service of the stack records on it, and the tickets gauge is registered on it when
	// the stack runs the gate or the api.
	Metrics *telemetry.Metrics
	// TracerProvider gives the services' spans (see telemetry.TracerProviderFromEnv); nil
	// disables tracing.
	TracerProvider trace.TracerProvider
	// HTTPAddr, when set, is the host:port of the process's operations listener:
	// /metrics, /healthz and /readyz (see [Stack.Ready]). Port 0 picks a free port
	// ([Stack.HTTPAddr]). Empty: no listener (the api mounts /metrics on its own server).
	HTTPAddr string
	// NoEnsure leaves stream and bucket creation to a privileged step (`awaken setup`, see
	// [Setup]): Start then only waits until the buckets exist. Services that connect as
	// least-privilege NATS users must set it, since they may not create streams.
	NoEnsure bool
	// Server is the NATS server the stack owns, when it started one itself
	// (internal/wiring/app/embedded): Stop shuts it down once the services are drained, and
	// [Stack.URL] is its client URL. nil: the server is someone else's.
	Server servicerun.OwnedServer
}

// Stack is a set of running awaken services ([servicerun.Stack]) and the api among them.
type Stack struct {
	*servicerun.Stack
	// APIService is the running api when Services named [contracts.ServiceAPI] (nil otherwise).
	APIService *api.Service
}

// Start ensures the topology and starts the chosen services. On error, everything started
// so far is stopped.
func Start(ctx context.Context, o Options) (*Stack, error) {
	services := o.Services
	if len(services) == 0 {
		services = AllServices()
	}
	order := append(AllServices(), contracts.ServiceAPI)
	for _, s := range services {
		if !slices.Contains(order, s) {
			return nil, fmt.Errorf("app: unknown service %q", s)
		}
	}
	inOrder := slices.DeleteFunc(order, func(s string) bool { return !slices.Contains(services, s) })
	st, err := servicerun.Start(ctx, servicerun.Options{
		Config: o.Config, Services: inOrder, Dial: o.Dial, Log: o.Log, Faults: o.Faults, OnHandOffMismatch: o.OnHandOffMismatch, Now: o.Now,
		Topology: o.Topology, Metrics: o.Metrics, TracerProvider: o.TracerProvider,
		HTTPAddr: o.HTTPAddr, NoEnsure: o.NoEnsure, Server: o.Server,
		Start: func(ctx context.Context, st *servicerun.Stack, name string, env *pipeline.Env) (servicerun.Service, error) {
			return startOne(ctx, st, name, env, o)
		},
	})
	if err != nil {
		return nil, err
	}
	out := &Stack{Stack: st}
	out.APIService, _ = st.Service(contracts.ServiceAPI).(*api.Service)
	return out, nil
}

// startOne starts one service, applying the configuration's consumer settings
// (consumers.ack_wait) to every durable consumer it creates.
func startOne(ctx context.Context, st *servicerun.Stack, name string, env *pipeline.Env, o Options) (servicerun.Service, error) {
	// One delivery option for every service: consumers.ack_wait (0 keeps the default; the
	// executors apply it themselves, execcore.StartConfigured).
	ackWait := bus.WithAckWait(o.Config.Consumers.AckWait.D())
	switch name {
	case contracts.ServiceBatcher:
		return batcher.Start(ctx, batcher.DepsOf(env), ackWait)
	case contracts.ServiceGate:
		return gate.Start(ctx, gate.DepsOf(env), ackWait)
	case contracts.ServiceBrainExec:
		return brainexec.Start(ctx, env, o.BrainRegistry, o.BrainBuiltins)
	case contracts.ServiceSandboxExec:
		return sandboxexec.Start(ctx, env)
	case contracts.ServicePublisher:
		return publisher.Start(ctx, publisher.DepsOf(env), ackWait)
	case contracts.ServiceAPI:
		apiOpts := o.API
		if apiOpts.Metrics == nil {
			apiOpts.Metrics = st.Metrics().Handler()
		}
		if apiOpts.Ready == nil {
			apiOpts.Ready = st.Ready
		}
		if apiOpts.NewClient == nil {
			apiOpts.NewClient = func(opts ...client.Option) (*client.Client, error) { return client.New(env.Conn, opts...) }
		}
		return api.Start(ctx, api.DepsOf(env), apiOpts)
	}
	return nil, fmt.Errorf("unknown service %q", name)
}
