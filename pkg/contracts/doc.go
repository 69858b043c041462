// Package contracts is the public vocabulary of awaken: the tool-call types, the durable
// batch state machine, the permission grammar, resume validation, the wire events of the
// normative protocol (DESIGN §3) and the names of every subject, stream, bucket and durable
// consumer.
//
// It is the pure kernel: it imports no NATS package and performs no I/O, so every rule here
// can be tested by tables, properties and fuzzing, and outside producers can import it
// without pulling in the transport.
package contracts
