package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Micro endpoints. Each is registered under the subject group [MicroGroup]:
// "{prefix}.api.tickets.list" and so on. The group is not "{prefix}" itself because the
// streams capture subjects under "{prefix}.tickets" and "{prefix}.runs": a request on
// "awaken.tickets.list" would be stored in the tickets stream and answered by its
// PubAck, and "awaken.runs.cancel" is the cancellation subject the gate consumes.
const (
	// EndpointTicketsList lists the open tickets. Request body: empty. Reply:
	// {"tickets":[ResumeTicket...]}, oldest first.
	EndpointTicketsList = "tickets.list"
	// EndpointTicketsGet returns one ticket. Request body: the correlation id, as a bare
	// string or {"correlation_id": "…"}. Reply: the ResumeTicket.
	EndpointTicketsGet = "tickets.get"
	// EndpointTicketsResolve answers a ticket. Request body: a complete ResumeCommand
	// (docs/protocol.md §7; any result kind), or the short form {"correlation_id", "decision":
	// "allow"|"deny", "note"|"reason", "arguments"?}. Reply: the gate's TicketResolution.
	// The resolution is recorded as made by [MicroActor]; the same request on
	// EndpointTicketsResolve + ".{user}" (a subject auth.conf lets only that NATS user
	// publish) is recorded as made by "nats:{user}".
	EndpointTicketsResolve = "tickets.resolve"
	// EndpointTicketsResolveAs is EndpointTicketsResolve for the NATS user {user}: the
	// same requests, recorded as decided by "nats:{user}". Grant each person's NATS user
	// publish on its own subject only ([ResolveAsSubject]).
	EndpointTicketsResolveAs = "tickets.resolve.{user}"
	// EndpointRunsCancel cancels a run and answers once it has ended. Request body:
	// {"run_id","reason"?} or the bare run id. Reply: {"run_id","status":"ended","reason",
	// "ended_at"} (see [Service.CancelRun]).
	EndpointRunsCancel = "runs.cancel"
	// EndpointToolsPause pauses a tool (the kill switch). Request body:
	// {"tool_id","reason"?,"actor"?}. Reply: contracts.ToolPauseState.
	EndpointToolsPause = "tools.pause"
	// EndpointToolsResume lifts a tool's pause. Request body: {"tool_id","actor"?}. Reply:
	// ToolPauseState.
	EndpointToolsResume = "tools.resume"
)

// MicroGroup is the subject prefix of the micro endpoints for a deployment prefix.
func MicroGroup(prefix string) string { return prefix + ".api" }

// MicroSubject is the request subject of endpoint (one of the Endpoint constants).
func MicroSubject(prefix, endpoint string) string { return MicroGroup(prefix) + "." + endpoint }

// ResolveAsSubject is the resolve subject of the NATS user user
// ([EndpointTicketsResolveAs]).
func ResolveAsSubject(prefix, user string) string {
	return MicroSubject(prefix, strings.Replace(EndpointTicketsResolveAs, "{user}", user, 1))
}

// Headers of a micro error reply besides micro's own Nats-Service-Error (the message) and
// Nats-Service-Error-Code (the awaken code, e.g. not_waiting).
const (
	// HeaderStatus carries the HTTP status the same refusal gets on the HTTP api.
	HeaderStatus = "Awaken-Status"
)

// maxMicroBody bounds a micro request body.
const maxMicroBody = 256 << 10

func (s *Service) startMicro() error {
	svc, err := micro.AddService(s.env.Conn, micro.Config{
		Name:        MicroName,
		Version:     ServiceVersion,
		Description: "awaken approvals: list, get and resolve tickets; cancel runs and calls; resolve indeterminate calls; list, pause and resume tools",
		Metadata:    map[string]string{"prefix": s.env.Names.Prefix},
	})
	if err != nil {
		return fmt.Errorf("api: add micro service: %w", err)
	}
	g := svc.AddGroup(MicroGroup(s.env.Names.Prefix))
	endpoints := []struct {
		name, subject string
		handle        func(context.Context, micro.Request) (any, error)
	}{
		{"tickets-list", EndpointTicketsList, s.microTicketsList},
		{"tickets-get", EndpointTicketsGet, s.microTicketsGet},
		{"tickets-resolve", EndpointTicketsResolve, s.microTicketsResolve},
		{"tickets-resolve-as", strings.Replace(EndpointTicketsResolveAs, "{user}", "*", 1), s.microTicketsResolve},
		{"runs-cancel", EndpointRunsCancel, s.microRunsCancel},
		{"calls-cancel", EndpointCallsCancel, s.microCallsCancel},
		{"calls-resolve", EndpointCallsResolve, s.microCallsResolve},
		{"tools-list", EndpointToolsList, s.microToolsList},
		{"tools-pause", EndpointToolsPause, s.microPauseTool},
		{"tools-resume", EndpointToolsResume, s.microResumeTool},
	}
	for _, e := range endpoints {
		h := s.microHandler(e.handle)
		if err := g.AddEndpoint(e.name, h, micro.WithEndpointSubject(e.subject)); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("api: add micro endpoint %s: %w", e.subject, err)
		}
	}
	// The subscriptions are registered when the server has read them: flush, so that a
	// started api answers the very next request, from any connection.
	if err := s.env.Conn.Flush(); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("api: register micro endpoints: %w", err)
	}
	s.micro = svc
	return nil
}

// microHandler runs handle off the subscription's goroutine (micro delivers one request
// per endpoint at a time, and a resolve waits for the gate), bounded by MaxInFlight, and
// replies with its JSON result or its error.
func (s *Service) microHandler(handle func(context.Context, micro.Request) (any, error)) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if !ReplyAllowed(req.Reply()) {
			// Not answered at all: a reply is a publish with the api's credentials, and a
			// requester that names a stream's or a bucket's subject as its reply would make
			// the api write there (finding 1 of security round 3).
			s.log.Warn().Str("subject", req.Subject()).Str("reply", req.Reply()).
				Msg("micro request refused: its reply subject is not an inbox")
			return
		}
		select {
		case s.sem <- struct{}{}:
		default:
			s.microError(req, apiErr(http.StatusServiceUnavailable, CodeUnavailable, "too many requests in flight"))
			return
		}
		if !s.begin() {
			<-s.sem
			s.microError(req, apiErr(http.StatusServiceUnavailable, CodeUnavailable, "the api is stopping"))
			return
		}
		// From here on the request is answered from another goroutine, after this
		// handler has returned: reply through a detached request (see there).
		detached := detachedRequest{Request: req, conn: s.env.Conn}
		go func(req micro.Request) {
			defer s.inflight.Done()
			defer func() { <-s.sem }()
			if len(req.Data()) > maxMicroBody {
				s.microError(req, apiErr(http.StatusRequestEntityTooLarge, CodeInvalidRequest, "request body is larger than %d bytes", maxMicroBody))
				return
			}
			ctx, cancel := context.WithTimeout(s.ctx, s.opts.ResolveTimeout+5*time.Second)
			defer cancel()
			v, err := handle(ctx, req)
			if err != nil {
				s.microError(req, asError(err))
				return
			}
			if err := req.RespondJSON(v); err != nil {
				s.log.Warn().Err(err).Str("subject", req.Subject()).Msg("micro reply failed")
			}
		}(detached)
	})
}

// detachedRequest answers a micro request without touching micro's request value. micro
// records a reply's error in the request and reads that field, without synchronisation,
// as soon as the handler returns; replying through it from the api's own goroutine is a
// data race. This publishes the same replies (micro's error headers included) on the
// connection instead; micro's per-endpoint error counters do not see them.
type detachedRequest struct {
	micro.Request
	conn *nats.Conn
}

func (r detachedRequest) Respond(data []byte, opts ...micro.RespondOpt) error {
	msg := &nats.Msg{Data: data}
	for _, opt := range opts {
		opt(msg)
	}
	return r.publish(msg)
}

func (r detachedRequest) RespondJSON(v any, opts ...micro.RespondOpt) error {
	data, err := json.Marshal(v)
	if err != nil {
		return micro.ErrMarshalResponse
	}
	return r.Respond(data, opts...)
}

func (r detachedRequest) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	if code == "" || description == "" {
		return fmt.Errorf("%w: error code and description", micro.ErrArgRequired)
	}
	msg := &nats.Msg{Header: nats.Header{
		micro.ErrorHeader:     []string{description},
		micro.ErrorCodeHeader: []string{code},
	}}
	for _, opt := range opts {
		opt(msg)
	}
	msg.Data = data
	return r.publish(msg)
}

func (r detachedRequest) publish(msg *nats.Msg) error {
	msg.Subject = r.Reply()
	if msg.Subject == "" {
		return nats.ErrMsgNoReply
	}
	if !ReplyAllowed(msg.Subject) {
		return fmt.Errorf("%w: reply subject %q is not an inbox", micro.ErrRespond, msg.Subject)
	}
	if err := r.conn.PublishMsg(msg); err != nil {
		return fmt.Errorf("%w: %w", micro.ErrRespond, err)
	}
	return nil
}

// ReplyAllowed reports whether the api answers a micro request whose reply subject is
// reply: only an inbox, "_INBOX." (every NATS client's default) or a service's
// "_INBOX_<service>." ([deploy.ServiceInboxPrefix]), and only a subject without
// wildcards. No stream or bucket captures those subjects, so a reply can never be stored.
// deploy/nats/auth.conf enforces the same in the server: the api may publish replies on
// "_INBOX.>" only, and has no allow_responses (a reply permission would override its
// publish grants).
func ReplyAllowed(reply string) bool {
	if strings.ContainsAny(reply, "*> \t\r\n") {
		return false
	}
	if rest, ok := strings.CutPrefix(reply, nats.InboxPrefix); ok {
		return rest != ""
	}
	if rest, ok := strings.CutPrefix(reply, "_INBOX_"); ok {
		svc, tail, found := strings.Cut(rest, ".")
		return found && svc != "" && tail != ""
	}
	return false
}

func (s *Service) microError(req micro.Request, e *Error) {
	if e.Code == CodeInternal {
		s.log.Error().Err(e.err).Str("subject", req.Subject()).Msg("micro request failed")
	}
	body, _ := json.Marshal(e)
	hdr := micro.Headers{HeaderStatus: []string{strconv.Itoa(e.Status)}}
	if err := req.Error(e.Code, e.Message, body, micro.WithHeaders(hdr)); err != nil {
		s.log.Warn().Err(err).Str("subject", req.Subject()).Msg("micro error reply failed")
	}
}

// TicketList is the reply of tickets.list and GET /v1/tickets.
type TicketList struct {
	Tickets []contracts.ResumeTicket `json:"tickets"`
}

func (s *Service) microTicketsList(ctx context.Context, _ micro.Request) (any, error) {
	ts, err := s.Tickets(ctx)
	if err != nil {
		return nil, err
	}
	return TicketList{Tickets: ts}, nil
}

// bareOrField reads a request body that is either a bare token (optionally a JSON string)
// or a JSON object whose field holds it.
func bareOrField(data []byte, field string) (string, error) {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return "", apiErr(http.StatusBadRequest, CodeInvalidRequest, "the request body must name the %s", field)
	case data[0] == '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return "", apiErr(http.StatusBadRequest, CodeInvalidRequest, "request body: %v", err)
		}
		var v string
		if raw, ok := m[field]; !ok || json.Unmarshal(raw, &v) != nil {
			return "", apiErr(http.StatusBadRequest, CodeInvalidRequest, "request body: %s must be a string", field)
		}
		return v, nil
	case data[0] == '"':
		var v string
		if err := json.Unmarshal(data, &v); err != nil {
			return "", apiErr(http.StatusBadRequest, CodeInvalidRequest, "request body: %v", err)
		}
		return v, nil
	}
	return string(data), nil
}

func (s *Service) microTicketsGet(ctx context.Context, req micro.Request) (any, error) {
	corr, err := bareOrField(req.Data(), "correlation_id")
	if err != nil {
		return nil, err
	}
	return s.Ticket(ctx, corr)
}

// ShortDecision is the short form of a resolve request: the api reads the ticket and
// builds the full resume command from it.
type ShortDecision struct {
	CorrelationID string                           `json:"correlation_id"`
	Decision      contracts.PermissionDecisionKind `json:"decision"`
	Note          string                           `json:"note,omitempty"`
	Reason        string                           `json:"reason,omitempty"`
	// Arguments, on an allow, edit the call's arguments.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsDigest, on an allow, names the ticket arguments the approval approves
	// (absent: those of the ticket the api reads).
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
}

func (s *Service) microTicketsResolve(ctx context.Context, req micro.Request) (any, error) {
	data := req.Data()
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, apiErr(http.StatusBadRequest, CodeInvalidRequest, "request body must be a JSON object: %v", err)
	}
	actor := s.microUserActor(req.Subject())
	if _, full := probe["result"]; full {
		return s.Resolve(ctx, data, actor)
	}
	var d ShortDecision
	if err := strictJSON(data, &d); err != nil {
		return nil, err
	}
	switch d.Decision {
	case contracts.DecisionAllow:
		if d.Reason != "" {
			return nil, apiErr(http.StatusBadRequest, string(contracts.ResumeInvalid), "an allow decision carries a note, not a reason")
		}
		return s.Decide(ctx, d.CorrelationID, Decision{Allow: true, Text: d.Note, Arguments: d.Arguments, ArgumentsDigest: d.ArgumentsDigest, Actor: actor})
	case contracts.DecisionDeny:
		if d.Note != "" {
			return nil, apiErr(http.StatusBadRequest, string(contracts.ResumeInvalid), "a deny decision carries a reason, not a note")
		}
		return s.Decide(ctx, d.CorrelationID, Decision{Text: d.Reason, Arguments: d.Arguments, Actor: actor})
	}
	return nil, apiErr(http.StatusBadRequest, string(contracts.ResumeInvalid), "decision %q is neither allow nor deny", d.Decision)
}

// CancelRequest is the body of runs.cancel and POST /v1/runs/{run_id}/cancel.
type CancelRequest struct {
	RunID  string `json:"run_id,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (s *Service) microRunsCancel(ctx context.Context, req micro.Request) (any, error) {
	data := bytes.TrimSpace(req.Data())
	var cr CancelRequest
	if len(data) > 0 && data[0] == '{' {
		if err := strictJSON(data, &cr); err != nil {
			return nil, err
		}
	} else {
		id, err := bareOrField(data, "run_id")
		if err != nil {
			return nil, err
		}
		cr.RunID = id
	}
	return s.CancelRun(ctx, cr.RunID, cr.Reason)
}

// strictJSON decodes one JSON object into v, refusing unknown fields and trailing data.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiErr(http.StatusBadRequest, CodeInvalidRequest, "request body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apiErr(http.StatusBadRequest, CodeInvalidRequest, "request body: trailing data after the JSON object")
	}
	return nil
}
