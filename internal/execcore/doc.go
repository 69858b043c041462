// Package execcore is the executor hop shared by brain-exec and sandbox-exec: it consumes
// the executor requests of one target, owns the Entered/EnteredBy protocol and crash
// recovery of a call, runs the tool through an [Invoker] under a timeout, commits the
// outcome with a compare-and-swap. The terminal revision of the call record is its output
// announcement (a CallOutput revision of the calls bucket's stream, see internal/pipeline):
// nothing else is published for it.
//
// # Exactly once
//
// The gate commits a call as Executing{attempt} with Entered false before it publishes the
// executor request. The executor handles a request message like this:
//
//  1. Read the call record. A terminal record is done: its terminal revision announced it
//     already; a Requested or Awaiting record means the request is stale.
//  2. Executing and not Entered: commit Entered with EnteredBy = the stream sequence of this
//     request message, then invoke. Entered by another message: a duplicate request, ignored
//     (the delivery that entered owns the call). Entered by this very message: its handler
//     died after entering — recovery by the pinned policy: never_replay makes the call
//     Indeterminate without invoking it again; replay_safe, idempotent and durable_request
//     commit attempt n+1 and invoke again, until max_attempts, then Indeterminate.
//     One exception saves a write per call: the first delivery of a replay_safe call whose
//     max_attempts allows a replay invokes without committing Entered (repeating its body
//     is as good as running it once), and a redelivery that finds it still not entered
//     recovers it as if this message had entered it, so the crash counts as an attempt.
//  3. Invoke under the tool's timeout with the invocation in the context; the bus heartbeats
//     the message meanwhile so a long tool is not redelivered.
//  4. Commit Completed(output) by compare-and-swap — only if this delivery still owns the
//     attempt; that revision is the CallOutput — then return so the bus acknowledges.
//
// An output over the inline limit is stored in the objects bucket before step 4, under a
// name derived from the operation id and its digest, and committed as a resource_link
// (objects.go); a body's progress reports are published, throttled and best effort, on the
// run's events subject and never reach the record (progress.go).
//
// A crash anywhere leaves the message unacknowledged; its redelivery carries the same stream
// sequence and lands in step 1 or 2 above, so a never_replay body runs at most once.
package execcore
