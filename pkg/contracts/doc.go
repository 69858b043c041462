// Package contracts is the public vocabulary of awaken: the tool-call types, the durable
// state machine of a batch and its calls (the records every service stores, moved only by
// their transitions), the permission policy and limits, resume validation, the wire events
// of the normative protocol and the names of every subject, stream, bucket and durable
// consumer.
//
// Subjects of their own live in leaf packages under it, which it uses: the permission-pattern
// language in [github.com/awaken-dev/awaken/pkg/contracts/toolpattern], the derivation of a
// Go type's JSON Schema in [github.com/awaken-dev/awaken/pkg/contracts/typeschema].
//
// It is the pure kernel: it and its leaves import only the standard library and perform no
// I/O, so every rule here can be tested by tables, properties and fuzzing, and outside
// producers can import it without pulling in the transport.
package contracts
