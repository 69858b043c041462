// Package contracts is the public vocabulary of awaken: the tool-call types, the durable
// state machine of a batch and its calls (the records every service stores, moved only by
// their transitions), the permission grammar, resume validation, the wire events of the
// normative protocol and the names of every subject, stream, bucket and durable
// consumer.
//
// It is the pure kernel: it imports no NATS package and performs no I/O, so every rule here
// can be tested by tables, properties and fuzzing, and outside producers can import it
// without pulling in the transport.
package contracts
