package pipeline

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// A pipeline service does not hold the environment: it is given a dependency value of its
// own (batcher.Deps, gate.Deps, publisher.Deps, api.Deps) that names what it works with —
// the pieces below, the stores it reads and writes, the capabilities it calls — built from
// an [*Env] by the service's DepsOf, the one place in a service that names the environment
// (internal/archrules keeps it so). Reading a service's Deps shows its dependencies.

// Runtime is what every pipeline service runs on: its consume loops, the effects runtime
// its handlers return to, and the CloudEvents it builds. [*Env] implements it.
type Runtime interface {
	// StartConsumers ensures the durable consumers of routes and starts consuming them.
	StartConsumers(ctx context.Context, opts bus.DeliveryOptions, routes []bus.Route, log zerolog.Logger) (*bus.Consumers, error)
	// Delivery is the service's delivery options over defaults.
	Delivery(defaults bus.DeliveryOptions, opts ...bus.DeliveryOption) bus.DeliveryOptions
	// Handle is the consume loop's handler of an effects handler ([Env.Handle]).
	Handle(service string, h EffectHandler) bus.Handler
	// Apply runs effects that do not start at a delivery ([Env.Apply]).
	Apply(ctx context.Context, service string, eff Effects) error
	// Event builds a CloudEvent with a deterministic id.
	Event(service, id, typ string, payload any) (cloudevent.Event, error)
}

var _ Runtime = (*Env)(nil)

// Basics are the values every service reads: the trusted configuration, the deployment's
// names, the logger, the clock and the telemetry.
type Basics struct {
	Config    *config.Config
	Names     contracts.Names
	Log       zerolog.Logger
	Now       func() time.Time
	Telemetry *telemetry.Telemetry
}

// Basics returns e's basics. The clock and telemetry are e's at the call: set them before.
func (e *Env) Basics() Basics {
	return Basics{Config: e.Config, Names: e.Names, Log: e.Log, Now: e.Now, Telemetry: e.Telemetry}
}

// BatchReader reads batch records: the immutable part from the cache, the phase fresh.
// [*Env] implements it.
type BatchReader interface {
	Batch(ctx context.Context, runID string, step int64) (*contracts.BatchRecord, error)
	FreshBatch(ctx context.Context, runID string, step int64) (contracts.BatchRecord, error)
	CachedBatch(runID string, step int64) (*contracts.BatchRecord, bool)
	Remember(rec *contracts.BatchRecord)
}

var _ BatchReader = (*Env)(nil)

// Notices sends an event on core NATS, nothing stored: a notice whose loss its reader
// recovers from by asking. [*Env] implements it.
type Notices interface {
	PublishNotice(subject string, ev cloudevent.Event) error
}

var _ Notices = (*Env)(nil)

// PauseReader says whether a tool is paused, from the executors' watch of the pauses
// bucket. [*Env] implements it.
type PauseReader interface {
	ToolPaused(ctx context.Context, toolID string) (*contracts.ToolPause, error)
}

var _ PauseReader = (*Env)(nil)
