// Package mcpserve serves awaken's tool catalog as an MCP server: any MCP client gets the
// gate, approvals, exactly-once and the audit by pointing at the api's /mcp route
// (Streamable HTTP) or at `awaken mcp-serve` (stdio). It is a door like the api's batch
// door: it never decides anything about a call itself. Each tools/call becomes one batch
// submission published on the submissions subject through pkg/client, so the batcher,
// the gate and the executors treat it exactly like a platform's batch.
//
// The mapping (normative text: docs/protocol.md, "awaken as an MCP server"):
//
//   - An HTTP session belongs to the authenticated actor that opened it: a request naming
//     it under another actor is answered 404, as for an unknown session (owners.go). The
//     open sessions are bounded per actor and in total.
//   - One MCP session is one run: run id "mcp-{first 24 hex digits of sha256(session
//     id)}-{generation}", the generation starting at 1 and counting up each time a
//     cancel ended the session's run. Each call is a step of the run, numbered from 1.
//   - The calls of one session run one at a time, in arrival order, each its own batch:
//     a call's batch is submitted only once the previous one's results are published, so
//     the batcher's run_busy never reaches the client. At most MaxQueuedCalls calls of a
//     session are running or waiting; past that a call is refused at once.
//   - The result is the call's published output as MCP content: text, images, audio,
//     embedded resources, resource links (outputs stored by reference get the link
//     awaken://objects/{name}, readable with resources/read), structuredContent; a
//     blocked call is an isError result with the reason; an indeterminate one says so.
//   - A call parked on approval sends notifications/progress (when the client gave a
//     progressToken) naming the ticket and its deadline while it is open; the result
//     follows when it is resolved. The Tasks extension is not offered: go-sdk v1.8.0 does
//     not implement it.
//   - A running tool's progress reports reach a client that sent a progressToken as
//     notifications/progress, on one increasing scale with those of a wait on a ticket.
//   - Over HTTP, notifications/cancelled, or a tools/call request that goes away
//     unanswered, cancels that call (the one-call cancel); the session's next call then
//     runs as the run's next step. Over stdio notifications/cancelled cancels the
//     session's run (awaken mcp-serve's NATS user may not cancel single calls); the
//     session's next call starts the next generation's run.
//   - Client-executed tools are not offered: an MCP client cannot execute them.
//   - Over HTTP the door speaks the protocol versions with sessions (SessionVersions);
//     a server/discover probe for the sessionless one is answered method not found, as a
//     server of those versions answers it, and the client initializes a session.
package mcpserve
