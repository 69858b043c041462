// Package mcpbridge mounts the MCP servers named in the host configuration
// (executors.mcp) into brain-exec. Each server is a stdio command, run as a child process,
// or a streamable HTTP endpoint; both are spoken with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk). Every tool a server lists becomes a tool
// descriptor with the id mcp__{server}__{tool}; calls to those ids go through the same
// visibility, gate, executor and result path as any other tool, so the bridge is only the
// body of the call, never a side channel around the gate.
//
// # Lifecycle
//
// [Bridge.Start] connects to every server and lists its tools. A server that is down is
// not fatal: it is retried lazily when one of its tools is invoked or descriptors are
// requested, and periodically in the background, so a server that comes up later simply
// starts to work. A session whose transport dies (the child exited, the HTTP session was
// lost) is noticed and replaced on the next use. [Bridge.Close] cancels the calls in
// flight, closes every session and terminates every stdio child (stdin closed, then
// SIGTERM and SIGKILL to its process group after a grace period).
//
// # Failure classification
//
// Exactly-once execution depends on one distinction: whether a failed call may have
// reached the server. brain-exec retries a [contracts.UnavailableBeforeDispatch] failure
// without counting a replay, so that error is returned only with proof that the
// tools/call request was not delivered; every other failure is
// [contracts.ExecutionFailed], which licenses nothing.
//
// The SDK's errors alone cannot give that proof: a connection that broke before the
// request was written and one that broke while the response was awaited can surface as
// the same error value, and the streamable HTTP client wraps every failure of its POST as
// "rejected by transport", including an EOF from a server that read the request, started
// the tool and died before answering (the tests reproduce exactly that). The bridge
// therefore observes the transport itself. Each
// invocation carries a probe in its context; the transports record in it every attempt to
// hand the tools/call request to the wire and whether that attempt provably delivered
// nothing:
//
//   - stdio: the connection wrapper sees the SDK write the request and counts the bytes
//     that reach the child's stdin pipe. An attempt whose write failed with zero bytes
//     accepted by the pipe delivered nothing (a partial write counts as delivered: the
//     SDK's reader decodes a JSON value without waiting for the newline).
//   - HTTP: the http.RoundTripper under the SDK sees the POST carrying the request. An
//     attempt that failed to dial (connection refused, DNS failure: no byte was sent; a
//     POST is never silently retried by net/http once bytes were written) delivered
//     nothing, as did one answered 404 for the session id it carried, which the MCP
//     transport specification requires of a server that no longer knows the session,
//     instead of processing the request.
//
// A call is [contracts.UnavailableBeforeDispatch] when connecting (or reconnecting)
// failed, when listing tools on the way failed, or when every attempt recorded in its
// probe delivered nothing (including no attempt at all: the SDK refused to send because
// the session was already closed). Any other failure — a timeout, the connection lost
// while waiting, a protocol error, an HTTP status other than that 404, an attempt still
// in progress when the caller gave up — is [contracts.ExecutionFailed]. Misclassifying in
// that direction only costs a retry that could have been taken; the opposite would
// replay an effect, so every ambiguous case falls on this side.
//
// When a call on an established session fails before dispatch while the caller's
// context is still live, the session is known broken: it is discarded and the call is
// retried once on a fresh session within the same invocation, so the first call after a
// server restart succeeds.
//
// Over streamable HTTP, a server that dies after it started streaming its response leaves
// the SDK waiting for an answer that cannot come; such a call ends when its context does
// (the per-call timeout), as an execution failure.
//
// The request's _meta carries the operation id under [MetaOperationID], the call's
// idempotency key under [MetaIdempotencyKey] (io.awaken/idempotency-key: the same for every
// attempt, for servers that deduplicate or pass it on as an Idempotency-Key) and the trace
// context of the call's execute_tool span under traceparent and tracestate.
package mcpbridge
