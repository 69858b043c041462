// Package bus is the JetStream transport every awaken service uses (the CloudEvents codec
// it speaks is the public pkg/cloudevent): connection helpers, the idempotent
// topology of streams and key-value buckets, publishing with deterministic message ids
// (single, gathered-async, atomic batch and scheduled), the consume loop with its
// settlement rules (the embedded nats-server is internal/natsserver).
//
// The settlement contract (at-least-once delivery made exactly-once by idempotent
// handlers and deterministic message ids) is enforced here once, so that services only write
// handlers: a handler commits its state change and publishes its outputs, then returns;
// the bus acknowledges the input only after the handler returned nil. Every other outcome
// is classified — rejection, permanent failure, explicit retry, transient failure,
// exhaustion, panic — and settled so that no input is ever lost: a message is terminated
// only after its dead-letter copy is durable.
package bus
