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

	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// maxMicroBody bounds a micro request body.
const maxMicroBody = 256 << 10

func (s *Service) startMicro() error {
	svc, err := s.env.AddMicroService(micro.Config{
		Name:        MicroName,
		Version:     ServiceVersion,
		Description: "awaken approvals: list, get and resolve tickets; cancel runs and calls; resolve indeterminate calls; list, pause and resume tools",
		Metadata:    map[string]string{"prefix": s.env.Names.Prefix},
	})
	if err != nil {
		return fmt.Errorf("api: add micro service: %w", err)
	}
	g := svc.AddGroup(httpapi.MicroGroup(s.env.Names.Prefix))
	endpoints := []struct {
		name, subject string
		handle        func(context.Context, micro.Request) (any, error)
	}{
		{"tickets-list", httpapi.EndpointTicketsList, s.microTicketsList},
		{"tickets-get", httpapi.EndpointTicketsGet, s.microTicketsGet},
		{"tickets-resolve", httpapi.EndpointTicketsResolve, s.microTicketsResolve},
		{"tickets-resolve-as", strings.Replace(httpapi.EndpointTicketsResolveAs, "{user}", "*", 1), s.microTicketsResolve},
		{"runs-cancel", httpapi.EndpointRunsCancel, s.microRunsCancel},
		{"calls-cancel", httpapi.EndpointCallsCancel, s.microCallsCancel},
		{"calls-resolve", httpapi.EndpointCallsResolve, s.microCallsResolve},
		{"tools-list", httpapi.EndpointToolsList, s.microToolsList},
		{"tools-pause", httpapi.EndpointToolsPause, s.microPauseTool},
		{"tools-resume", httpapi.EndpointToolsResume, s.microResumeTool},
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
	if err := s.env.FlushSubscriptions(); err != nil {
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
			// the api write there.
			s.log.Warn().Str("subject", req.Subject()).Str("reply", req.Reply()).
				Msg("micro request refused: its reply subject is not an inbox")
			return
		}
		release, err := s.sem.take("too many requests in flight")
		if err != nil {
			s.microError(req, asError(err))
			return
		}
		if !s.begin() {
			release()
			s.microError(req, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "the api is stopping"))
			return
		}
		// From here on the request is answered from another goroutine, after this
		// handler has returned: reply through a detached request (see there).
		detached := detachedRequest{Request: req, reply: s.env.PublishReply}
		go func(req micro.Request) {
			defer s.inflight.Done()
			defer release()
			if len(req.Data()) > maxMicroBody {
				s.microError(req, apiErr(http.StatusRequestEntityTooLarge, httpapi.CodeInvalidRequest, "request body is larger than %d bytes", maxMicroBody))
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
	reply func(*nats.Msg) error
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
	if err := r.reply(msg); err != nil {
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

func (s *Service) microError(req micro.Request, e *httpapi.Error) {
	if e.Code == httpapi.CodeInternal {
		s.log.Error().Err(e.Err).Str("subject", req.Subject()).Msg("micro request failed")
	}
	body, _ := json.Marshal(e)
	hdr := micro.Headers{httpapi.HeaderStatus: []string{strconv.Itoa(e.Status)}}
	if err := req.Error(e.Code, e.Message, body, micro.WithHeaders(hdr)); err != nil {
		s.log.Warn().Err(err).Str("subject", req.Subject()).Msg("micro error reply failed")
	}
}

// bareOrField reads a request body that is either a bare token (optionally a JSON string)
// or a JSON object whose field holds it.
func bareOrField(data []byte, field string) (string, error) {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return "", apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "the request body must name the %s", field)
	case data[0] == '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return "", apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "request body: %v", err)
		}
		var v string
		if raw, ok := m[field]; !ok || json.Unmarshal(raw, &v) != nil {
			return "", apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "request body: %s must be a string", field)
		}
		return v, nil
	case data[0] == '"':
		var v string
		if err := json.Unmarshal(data, &v); err != nil {
			return "", apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "request body: %v", err)
		}
		return v, nil
	}
	return string(data), nil
}

// readObjectOrID reads a request body that is either a JSON object, decoded strictly
// into req, or the bare id alone (as bareOrField reads it), set in *id, req's field for it.
func readObjectOrID(data []byte, field string, req any, id *string) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		return strictJSON(data, req)
	}
	v, err := bareOrField(data, field)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// strictJSON decodes one JSON object into v, refusing unknown fields and trailing data.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "request body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "request body: trailing data after the JSON object")
	}
	return nil
}
