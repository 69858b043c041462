package mcpserve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// One MCP session: its runs and steps, and a tool call turned into a batch and waited for.

// session is the state of one MCP session: its run and the order of its calls.
type session struct {
	srv       *Server
	actor     string
	transport string
	fixedID   string   // the stdio session's id ("" over HTTP: the transport's)
	tools     []string // the tool ids the session offers (the batches' agent.tools)
	created   time.Time
	// ended is cancelled when the client ends the session (DELETE) or the session is
	// forgotten: its waiting calls answer at once, so the session's close (which waits for
	// them) goes through.
	ended context.Context
	end   context.CancelFunc

	mu         sync.Mutex
	queued     int           // calls running or waiting for their turn
	tail       chan struct{} // closed when the last admitted call has had its turn
	step       int64         // the last step submitted in the current run
	generation int           // counts the runs of the session (a cancel ends one)
	id         string        // the session id, once a call named it
}

// bind records the session's id (known from its first call) so a DELETE can find it.
func (ss *session) bind(id string) {
	ss.mu.Lock()
	first := ss.id == ""
	ss.id = id
	ss.mu.Unlock()
	if first && id != "" {
		ss.srv.sessions.Store(id, ss)
	}
}

func (ss *session) boundID() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.id
}

// endSession ends the waiting calls of session id (its client is deleting it).
func (s *Server) endSession(id string) {
	if v, ok := s.sessions.LoadAndDelete(id); ok {
		v.(*session).end()
	}
}

// sessionID is the MCP session id of req.
func (ss *session) sessionID(req *mcp.CallToolRequest) string {
	if ss.fixedID != "" {
		return ss.fixedID
	}
	if req.Session != nil {
		return req.Session.ID()
	}
	return ""
}

// RunID is the run of MCP session sessionID's generation-th run.
func RunID(sessionID string, generation int) string {
	sum := sha256.Sum256([]byte(sessionID))
	return fmt.Sprintf("mcp-%s-%d", hex.EncodeToString(sum[:12]), generation)
}

// admit takes a place in the session's queue and returns the channel to wait on before
// its turn and the one to close when the turn is over; ok false when the queue is full.
func (ss *session) admit() (wait, done chan struct{}, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.queued >= ss.srv.opts.Config.MaxQueuedCalls {
		return nil, nil, false
	}
	ss.queued++
	wait, done = ss.tail, make(chan struct{})
	ss.tail = done
	return wait, done, true
}

// leave ends a call's place in the queue. The turn passes on only once the call's own
// turn has come (wait closed): a call that leaves early (cancelled, or stopped, while it
// waited) must not let the one behind it run beside the one before it.
func (ss *session) leave(wait, done chan struct{}) {
	ss.mu.Lock()
	ss.queued--
	ss.mu.Unlock()
	select {
	case <-wait: // nil (first in the queue) blocks: handled below
	default:
		if wait != nil {
			go func() {
				<-wait
				close(done)
			}()
			return
		}
	}
	close(done)
}

// nextStep returns the run and step of the call whose turn it is.
func (ss *session) nextStep(sessionID string) (string, int64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.step++
	return RunID(sessionID, ss.generation), ss.step
}

// endRun moves the session to its next run (the current one was cancelled or ended).
func (ss *session) endRun(runID, sessionID string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if RunID(sessionID, ss.generation) == runID {
		ss.generation++
		ss.step = 0
	}
}

// toolError is an isError result whose text starts with code.
func toolError(code, format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
		&mcp.TextContent{Text: code + ": " + fmt.Sprintf(format, args...)}}}
}

// call runs one tools/call: bounds, its turn, the audit record, the batch, the result.
func (ss *session) call(ctx context.Context, req *mcp.CallToolRequest, t *tool) (*mcp.CallToolResult, error) {
	s := ss.srv
	args := req.Params.Arguments
	if len(args) > s.opts.Config.MaxArgumentBytes {
		return toolError(CodeArgumentsTooLarge, "the arguments have %d bytes, more than the %d this server accepts", len(args), s.opts.Config.MaxArgumentBytes), nil
	}
	if len(strings.TrimSpace(string(args))) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	if err := t.schema.Validate(args); err != nil {
		return toolError(CodeInvalidArguments, "the arguments of %s do not fit its input schema: %v", t.catalog.ID, err), nil
	}
	// The call's own context: ended as well when its HTTP stream goes away (cancel.go).
	ctx, endCall := context.WithCancelCause(ctx)
	defer endCall(nil)
	defer s.attachRequest(req, endCall)()
	wait, done, ok := ss.admit()
	if !ok {
		// A protocol error, not a tool result: the client sent more than it may, and the
		// model should not be told that the tool failed.
		return nil, fmt.Errorf("%s: %d calls of this session are already running or waiting (at most %d): wait for a result before calling again",
			CodeSessionFlooded, s.opts.Config.MaxQueuedCalls, s.opts.Config.MaxQueuedCalls)
	}
	defer ss.leave(wait, done)
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.stopped.Done():
			return toolError(CodeStopped, "the MCP server stopped before the call was submitted; nothing of it ran"), nil
		case <-ss.ended.Done():
			return toolError(CodeStopped, "the session ended before the call was submitted; nothing of it ran"), nil
		}
	}
	if s.stopped.Err() != nil {
		return toolError(CodeStopped, "the MCP server is stopping; nothing of the call ran"), nil
	}
	sessionID := ss.sessionID(req)
	ss.bind(sessionID)
	if ss.ended.Err() != nil {
		return toolError(CodeStopped, "the session has ended; nothing of the call ran"), nil
	}
	clientName, clientVersion := "", ""
	if ci := req.ClientInfo(); ci != nil {
		clientName, clientVersion = ci.Name, ci.Version
	}
	for {
		runID, step := ss.nextStep(sessionID)
		res, retry := ss.submit(ctx, req, t, args, runID, step, sessionID, clientName, clientVersion)
		if !retry {
			return res, nil
		}
	}
}

// submit publishes the call's audit record and batch and waits for its result. retry is
// set when the session's run had ended (cancelled elsewhere): the call is submitted again
// in the session's next run.
func (ss *session) submit(ctx context.Context, req *mcp.CallToolRequest, t *tool, args json.RawMessage,
	runID string, step int64, sessionID, clientName, clientVersion string) (res *mcp.CallToolResult, retry bool) {
	s := ss.srv
	callID := fmt.Sprintf("call-%d", step)
	sub := contracts.BatchSubmission{
		RunID: runID, ThreadID: runID, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "mcp", Tools: slices.Clone(ss.tools)},
		Calls: []contracts.ToolCall{{CallID: callID, ToolID: t.catalog.ID, Arguments: args}},
		Metadata: map[string]string{
			contracts.MetadataMCPSessionID: sessionID,
			contracts.MetadataMCPTransport: ss.transport,
			contracts.MetadataActor:        ss.actor,
		},
	}
	if clientName != "" {
		sub.Metadata[contracts.MetadataMCPClientName] = truncate(clientName)
	}
	if clientVersion != "" {
		sub.Metadata[contracts.MetadataMCPClientVersion] = truncate(clientVersion)
	}
	batchID := sub.BatchID()
	log := s.opts.Log.With().Str("run_id", runID).Str("batch_id", batchID).Str("call_id", callID).
		Str("tool_id", t.catalog.ID).Str("mcp_session", sessionID).Logger()
	if err := contracts.ValidateMetadata(sub.Metadata); err != nil {
		return toolError(CodeRejected, "the call's metadata: %v", err), false
	}
	if err := s.audit(ctx, contracts.MCPCallAudit{RunID: runID, BatchID: batchID, CallID: callID, ToolID: t.catalog.ID,
		SessionID: sessionID, ClientName: truncate(clientName), ClientVersion: truncate(clientVersion), Transport: ss.transport,
		Actor: ss.actor, At: time.Now().UTC()}); err != nil {
		log.Error().Err(err).Msg("mcp call refused: its audit record could not be stored")
		return toolError(CodeUnavailable, "the call's audit record could not be stored, so the call was not submitted: %v", err), false
	}

	// waitCtx ends with the handler (the client cancelled, or the session closed) or
	// with the server's stop.
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	defer context.AfterFunc(s.stopped, cancelWait)()
	defer context.AfterFunc(ss.ended, cancelWait)()
	cancelsBefore := s.cancelsOf(sessionID)
	if token := req.Params.GetProgressToken(); token != nil {
		progress := &progressSender{req: req, token: token, log: log}
		s.followToolProgress(waitCtx, progress, runID, batchID, callID)
		go ss.reportParked(waitCtx, progress, runID, step, callID)
	}
	for attempt := 0; ; attempt++ {
		got, err := s.opts.Client.SubmitAndWait(waitCtx, sub, client.WithEventID(client.AttemptEventID(sub)))
		var rejected *client.RejectedError
		switch {
		case err == nil:
			log.Info().Msg("mcp call answered")
			return render(got, batchID), false
		case errors.As(err, &rejected) && rejected.Code == string(contracts.RejectRunBusy):
			// Calls of a session are ordered and each waits for its batch's results, so
			// the run can be busy only with a batch the door did not submit (someone else
			// used the session's run id): wait and submit again, never tell the client.
			log.Info().Msg("mcp call: the run is busy; submitting again")
			if err = ctxsleep.Sleep(waitCtx, min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)); err == nil {
				continue
			}
		case errors.As(err, &rejected) && (rejected.Code == string(contracts.RejectRunCancelled) || rejected.Code == string(contracts.RejectRunEnded)):
			log.Info().Str("code", rejected.Code).Msg("mcp call: the session's run ended; submitting in its next run")
			ss.endRun(runID, sessionID)
			return nil, true
		case errors.As(err, &rejected):
			return toolError(CodeRejected, "awaken refused the call's batch %s: %s: %s", batchID, rejected.Code, rejected.Message), false
		}
		return ss.interrupted(ctx, err, runID, step, callID, sessionID, cancelsBefore, log), false
	}
}

// cancelSettle bounds how long a cancelled call's handler waits for the call to end
// (holding its session's turn, so the next call does not find the run busy).
const cancelSettle = 10 * time.Second

// interrupted answers a call whose wait ended before its result: the server stopped or
// the client ended the session (the call goes on: say where its result will be), or the
// client cancelled the call (notifications/cancelled) or gave up on it (its HTTP stream
// went away): that call is cancelled, and the session's run goes on.
func (ss *session) interrupted(ctx context.Context, err error, runID string, step int64, callID, sessionID string, cancelsBefore int64, log zerolog.Logger) *mcp.CallToolResult {
	s := ss.srv
	batchID := contracts.BatchID(runID, step)
	gaveUp := errors.Is(context.Cause(ctx), errStreamGone)
	switch {
	case s.stopped.Err() != nil:
		log.Info().Msg("mcp call: the server stopped while the call waited; the call goes on")
		return toolError(CodeStopped, "the MCP server stopped while the call waited; the call goes on in awaken as batch %s. %s",
			batchID, s.fetchHint(batchID))
	case ss.ended.Err() != nil:
		log.Info().Msg("mcp call: the client ended the session while the call waited; the call goes on")
		return toolError(CodeStopped, "the session ended while the call waited; the call goes on in awaken as batch %s. %s",
			batchID, s.fetchHint(batchID))
	case ctx.Err() != nil && (gaveUp || errors.Is(context.Cause(ctx), context.Canceled) && s.cancelsOf(sessionID) > cancelsBefore):
		// The client's notifications/cancelled (cancel.go: a closing session ends the
		// context the same way, but sends none), or its HTTP stream of the call is gone:
		// no one waits for the answer any more.
		reason := "the MCP client cancelled the call"
		if gaveUp {
			reason = "the MCP client gave up on the call (its HTTP request went away)"
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelSettle)
		defer cancel()
		if ss.transport == TransportStdio {
			// awaken mcp-serve runs as a platform's NATS user, which may cancel runs but
			// neither cancel single calls nor read call records: it cancels the session's run.
			if cerr := s.opts.Client.Cancel(cctx, runID, reason); cerr != nil {
				log.Error().Err(cerr).Msg("mcp call: " + reason + "; cancelling its run failed")
			} else {
				log.Info().Msg("mcp call: " + reason + "; its run is cancelled")
			}
			ss.endRun(runID, sessionID)
			return toolError("cancelled", "the call was cancelled; its run %s is cancelled", runID)
		}
		res, cerr := s.opts.Client.CancelCall(cctx, contracts.OperationID(runID, step, callID), reason, ss.actor)
		var terminal *client.CallTerminalError
		switch {
		case errors.As(cerr, &terminal):
			log.Info().Str("outcome", string(terminal.Result.Outcome)).Msg("mcp call: " + reason + "; it had already ended")
			return toolError("cancelled", "the call had already ended (%s) before the cancel reached it; batch %s", terminal.Result.Outcome, batchID)
		case cerr != nil:
			log.Error().Err(cerr).Msg("mcp call: " + reason + "; cancelling it failed")
			return toolError("cancelled", "cancelling the call failed: %v. %s", cerr, s.fetchHint(batchID))
		}
		// The call is terminal; its batch's results follow. Hold the session's turn until
		// they are published, so the next call does not find the run busy.
		if _, err := s.opts.Client.Await(cctx, runID, step); err != nil {
			log.Warn().Err(err).Msg("mcp call: the cancelled call's results were not seen published")
		}
		log.Info().Str("status", res.Status).Msg("mcp call: " + reason + "; it is cancelled")
		return toolError("cancelled", "the call was cancelled (%s); batch %s", res.Status, batchID)
	case ctx.Err() != nil:
		log.Info().Err(context.Cause(ctx)).Msg("mcp call: the session went away while the call waited; the call goes on")
		return toolError(CodeStopped, "the session ended while the call waited; %s", s.fetchHint(batchID))
	}
	log.Error().Err(err).Msg("mcp call: submitting or following the batch failed")
	return toolError(CodeUnavailable, "submitting or following the call's batch %s failed: %v. %s", batchID, err, s.fetchHint(batchID))
}
