// Package telemetry is the operability layer of the awaken services: Prometheus metrics on
// a per-process registry, OpenTelemetry tracing carried across services in the CloudEvents
// distributed-tracing extension, and a small HTTP listener serving /metrics, /healthz and
// /readyz.
//
// The bus and the services do not import Prometheus or the OpenTelemetry SDK: the consume
// loop is observed through [bus.Observer] (see [Telemetry.Observer]), publishing through
// [bus.Injector] (see [Telemetry.Inject]), and the services record their domain events by
// calling the nil-safe methods of [*Telemetry] held in pipeline.Env. A nil *Telemetry
// records nothing, so tests and tools that do not care pay nothing.
package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names, exported so dashboards, alerts and tests refer to one spelling.
const (
	MetricMessages        = "awaken_consumer_messages_total"
	MetricHandlerDuration = "awaken_consumer_handler_duration_seconds"
	MetricRedeliveries    = "awaken_consumer_redeliveries_total"
	MetricDeadLetters     = "awaken_dead_letters_total"
	MetricGateDecisions   = "awaken_gate_decisions_total"
	MetricLimitEvents     = "awaken_limit_events_total"
	MetricCalls           = "awaken_calls_total"
	MetricIndeterminate   = "awaken_calls_indeterminate_total"
	MetricBatches         = "awaken_batches_total"
	MetricTicketsOpen     = "awaken_tickets_open"
	MetricTicketOldestAge = "awaken_tickets_oldest_age_seconds"
	MetricTicketsScrape   = "awaken_tickets_scrape_errors_total"
)

// Batch states counted by [MetricBatches].
const (
	BatchAccepted  = "accepted"
	BatchRejected  = "rejected"
	BatchPublished = "published"
)

// Bounded reasons of [MetricIndeterminate]. The full reason text stays in the call record
// and the logs; a label carries only its category so the series count stays bounded.
const (
	ReasonOwnerLeaseExpired = "owner_lease_expired"
	ReasonAttemptsExhausted = "attempts_exhausted"
	ReasonDeliveryExhausted = "delivery_exhausted"
	ReasonCancelled         = "cancelled"
	// ReasonCapabilityMismatch: a replay found the pinned policy unsupported by the tool's
	// current capability.
	ReasonCapabilityMismatch = "capability_mismatch"
)

// Metrics is the Prometheus registry of one process and every awaken metric in it. A
// process running several services (awaken dev) shares one Metrics between them; the
// consumer and service labels keep their series apart. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	messages      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	redeliveries  *prometheus.CounterVec
	deadLetters   *prometheus.CounterVec
	gateDecisions *prometheus.CounterVec
	calls         *prometheus.CounterVec
	indeterminate *prometheus.CounterVec
	batches       *prometheus.CounterVec
	limitEvents   *prometheus.CounterVec
}

// NewMetrics returns a fresh registry holding the awaken metrics and the Go runtime and
// process collectors. Nothing is registered globally: two Metrics never share a series,
// which keeps tests independent.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		messages: counterVec(MetricMessages, "Deliveries handled by a durable consumer, by settlement (ack, nak, dead_letter, abandoned).",
			"consumer", "result"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricHandlerDuration,
			Help:    "Handler latency per stage (the durable consumer name), whatever the settlement.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"consumer"}),
		redeliveries: counterVec(MetricRedeliveries, "Deliveries whose delivery count was above one (the server redelivered the message).",
			"consumer"),
		deadLetters: counterVec(MetricDeadLetters, "Messages copied to the dead-letter stream and terminated, by consumer and code.",
			"consumer", "code"),
		gateDecisions: counterVec(MetricGateDecisions, "Permission decisions the gate recorded, by audit label (allow, deny, ask, schedule, ...); counted once when committed.",
			"decision"),
		calls: counterVec(MetricCalls, "Calls published in a batch's results, by outcome (completed, indeterminate) and whether the output is an error.",
			"outcome", "is_error"),
		indeterminate: counterVec(MetricIndeterminate, "Calls a service committed as indeterminate, by service and reason category.",
			"service", "reason"),
		batches: counterVec(MetricBatches, "Batches by state transition: accepted and rejected (with code) at the batcher, published at the publisher.",
			"state", "code"),
		limitEvents: counterVec(MetricLimitEvents, "Evaluations of a host limit by the gate, by limit and outcome (counted, held: already counted for this operation, blocked, asked, would: a shadow limit the call was over, released: a call that never ran gave its share back).",
			"limit", "outcome"),
	}
	m.reg.MustRegister(m.messages, m.duration, m.redeliveries, m.deadLetters, m.gateDecisions,
		m.calls, m.indeterminate, m.batches, m.limitEvents,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// counterVec is a counter of the awaken metrics with its help text and label names.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Registry returns the process registry, e.g. to register a collector of one's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats. A scrape is bounded
// by timeout (collectors such as the tickets gauge respect it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:          m.reg,
		Timeout:           10 * time.Second,
		EnableOpenMetrics: true,
	})
}
