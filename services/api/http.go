package api

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

//go:embed console
var consoleFS embed.FS

// consoleFiles are the console's assets, served at fixed paths with fixed types.
var consoleFiles = []struct{ path, file, ctype string }{
	{"/{$}", "console/index.html", "text/html; charset=utf-8"},
	{"/console.js", "console/console.js", "text/javascript; charset=utf-8"},
	{"/console.css", "console/console.css", "text/css; charset=utf-8"},
}

// ContentSecurityPolicy is sent with every response: only same-origin scripts, styles and
// connections, no inline code, no framing, and no native form submission at all — the
// console's forms are handled by its script, so a form can never put the API token into a
// URL even if the script failed to load.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// maxBody bounds the body of a request, except a batch submission's.
const maxBody = 64 << 10

// Handler returns the HTTP handler of the api and console, for callers that serve it
// themselves (tests, or an operator's own server). Start serves it on Options.HTTPAddr.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, f := range consoleFiles {
		body, err := consoleFS.ReadFile(f.file)
		if err != nil {
			// The files are embedded at build time; a missing one is a build defect that
			// the console test catches. Serve a clear error rather than panic.
			body = []byte("console asset missing: " + f.file)
		}
		ctype := f.ctype
		mux.HandleFunc("GET "+f.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(body)
		})
	}
	// Browsers ask for a favicon; answer without content rather than with an error.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	// The probes stay open (orchestrators call them without credentials) and say no more
	// than up or not: the reason a readiness check failed names internals, so only a
	// caller that could read /v1 gets it.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.env.Connected() || s.streams.Err() != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
			return
		}
		if s.opts.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
			defer cancel()
			if err := s.opts.Ready(ctx); err != nil {
				body := map[string]string{"status": "unavailable"}
				if s.authorized(r) {
					body["reason"] = err.Error()
				}
				writeJSON(w, http.StatusServiceUnavailable, body)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	if s.opts.Metrics != nil {
		metrics := s.opts.Metrics
		if !s.opts.PublicMetrics {
			metrics = s.authenticate(metrics)
		}
		mux.Handle("GET /metrics", metrics)
	}

	api := http.NewServeMux()
	// A token without one of a route's roles (see roles.go) is refused 403 missing_role
	// before the handler runs.
	routes := s.routes()
	allowed := map[string][]string{} // path → its methods
	var paths []string
	for _, rt := range routes {
		limit := cmp.Or(rt.maxBody, maxBody)
		h, roles := rt.h, rt.roles
		api.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			if len(roles) > 0 {
				if err := s.requireRole(r, roles...); err != nil {
					s.writeError(w, r, err)
					return
				}
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			h(w, r)
		})
		if allowed[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for _, path := range paths {
		methods := strings.Join(allowed[path], ", ")
		api.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			s.writeError(w, r, apiErr(http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "%s is not allowed here; use %s", r.Method, methods))
		})
	}
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apiErr(http.StatusNotFound, httpapi.CodeNotFound, "no such endpoint"))
	})
	mux.Handle("/v1/", s.authenticate(s.protect(api)))
	if s.mcp != nil {
		// The MCP door (Streamable HTTP): the same bearer tokens as /v1, the token's name
		// recorded as the actor of every call's batch and audit record. Each call is a
		// submission, so the door needs the role of POST /v1/batches.
		door := s.mcp.HTTPHandler(func(r *http.Request) string { return actorOf(r.Context()) })
		mux.Handle("/mcp", s.authenticate(s.crossOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := s.requireRole(r, httpapi.RoleSubmitter); err != nil {
				s.writeError(w, r, err)
				return
			}
			door.ServeHTTP(w, r)
		}))))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apiErr(http.StatusNotFound, httpapi.CodeNotFound, "not found"))
	})
	return s.secure(mux)
}

// route is one /v1 route of [Service.Handler]: a method and a net/http path pattern, its
// handler, the bound of its request body (0: maxBody) and the roles that may use it (any
// one suffices; none: any authenticated caller).
type route struct {
	method, path string
	h            http.HandlerFunc
	maxBody      int64
	roles        []httpapi.Role
}

// routes is the table of the /v1 routes.
func (s *Service) routes() []route {
	read := []httpapi.Role{httpapi.RoleViewer}
	platform := []httpapi.Role{httpapi.RoleViewer, httpapi.RoleSubmitter}                      // what a platform loop reads
	catalog := []httpapi.Role{httpapi.RoleViewer, httpapi.RoleSubmitter, httpapi.RoleOperator} // the operator pauses from it
	approve := []httpapi.Role{httpapi.RoleApprover}
	operate := []httpapi.Role{httpapi.RoleOperator}
	submit := []httpapi.Role{httpapi.RoleSubmitter}
	return []route{
		{"GET", "/v1/session", s.httpSession, 0, nil},
		{"GET", "/v1/tickets", s.httpTickets, 0, read},
		{"GET", "/v1/tickets/{correlation_id}", s.httpTicket, 0, read},
		{"POST", "/v1/tickets/{correlation_id}/approve", s.httpApprove, 0, approve},
		{"POST", "/v1/tickets/{correlation_id}/deny", s.httpDeny, 0, approve},
		{"POST", "/v1/runs/{run_id}/cancel", s.httpCancel, 0, operate},
		{"POST", "/v1/calls/{operation_id}/cancel", s.httpCancelCall, 0, operate},
		{"POST", "/v1/calls/{operation_id}/resolve", s.httpResolveCall, 0, operate},
		{"GET", "/v1/runs/{run_id}/results", s.serveRunResults, 0, platform},
		// One byte over the protocol's limit, so that the batcher's own decoder reports
		// too_large with its own words (see httpSubmit).
		{"POST", "/v1/batches", s.httpSubmit, contracts.MaxSubmissionBytes + 1, submit},
		{"GET", "/v1/batches", s.httpBatches, 0, read},
		{"GET", "/v1/batches/{batch_id}", s.httpBatch, 0, read},
		{"GET", "/v1/batches/{batch_id}/results", s.httpBatchResults, 0, platform},
		{"GET", "/v1/stream", s.serveStream, 0, read},
		{"GET", "/v1/tools", s.httpTools, 0, catalog},
		{"GET", "/v1/objects/{name}", s.httpObject, 0, platform},
		{"POST", "/v1/tools/{tool_id}/pause", s.httpPauseTool, 0, operate},
		{"POST", "/v1/tools/{tool_id}/resume", s.httpResumeTool, 0, operate},
		// The backtest replays recorded calls with their arguments, and a candidate rule on
		// an argument answers whether it matches: it takes the role that reads them.
		{"POST", "/v1/policy/test", s.httpPolicyTest, maxPolicyTestBody, read},
		{"GET", "/v1/limits", s.httpLimits, 0, read},
	}
}

// Route is one /v1 route of the HTTP api: its method, its net/http path pattern
// ("/v1/tickets/{correlation_id}") and the roles that may use it (none: any
// authenticated caller).
type Route struct {
	Method, Path string
	Roles        []httpapi.Role
}

// Routes lists the /v1 routes [Service.Handler] serves, in the order they are registered:
// what a test walks to require a request of each, so that a route added later is not
// left out of the checks of every door.
func (s *Service) Routes() []Route {
	rs := s.routes()
	out := make([]Route, len(rs))
	for i, rt := range rs {
		out[i] = Route{Method: rt.method, Path: rt.path, Roles: slices.Clone(rt.roles)}
	}
	return out
}

// secure sets the security headers of every response and refuses a Host the api does not
// serve (DNS rebinding).
func (s *Service) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		if !s.hostAllowed(r.Host) {
			s.writeError(w, r, apiErr(http.StatusForbidden, httpapi.CodeForbidden, "host %q is not served here", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed implements Options.AllowedHosts (see there).
func (s *Service) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if slices.Contains(s.opts.AllowedHosts, "*") {
		return true
	}
	for _, a := range s.opts.AllowedHosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	if isLoopbackHost(host) {
		return true
	}
	// A non-loopback bind with no allow-list answers any host; a loopback bind only
	// loopback names (a rebinding attacker's name resolves to 127.0.0.1 but is not one).
	return len(s.opts.AllowedHosts) == 0 && !s.loopbackBind()
}

func (s *Service) loopbackBind() bool {
	if s.listener == nil {
		// Served by someone else's server (Handler): judge by the configured address.
		host, _, err := net.SplitHostPort(s.opts.HTTPAddr)
		return err == nil && isLoopbackHost(host)
	}
	addr, ok := s.listener.Addr().(*net.TCPAddr)
	return ok && addr.IP.IsLoopback()
}

// authenticate requires a configured bearer token on every /v1 request (and /metrics
// unless it is public) when any is configured, and gives the request the token's name as
// its actor and the token's roles ([Service.requireRole] checks them per route).
func (s *Service) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := s.tokenName(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="awaken"`)
			s.writeError(w, r, apiErr(http.StatusUnauthorized, httpapi.CodeUnauthorized, "a valid bearer token is required"))
			return
		}
		next.ServeHTTP(w, r.WithContext(withCaller(r.Context(), name, s.tokenRoles(name))))
	})
}

// authorized reports whether r may read what the tokens protect: none is configured, or
// r carries one as a bearer token.
func (s *Service) authorized(r *http.Request) bool {
	_, ok := s.tokenName(r)
	return ok
}

// protect refuses cross-site mutating requests: a state-changing method must carry
// Content-Type application/json (which no HTML form can send, and which makes a
// cross-origin fetch preflighted — a preflight the api never grants) and pass the
// Sec-Fetch-Site/Origin check of net/http's CrossOriginProtection.
func (s *Service) protect(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			next.ServeHTTP(w, r)
			return
		}
		if err := cop.Check(r); err != nil {
			s.writeError(w, r, apiErr(http.StatusForbidden, httpapi.CodeForbidden, "cross-site request refused"))
			return
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			s.writeError(w, r, apiErr(http.StatusUnsupportedMediaType, httpapi.CodeUnsupportedMediaType, "a %s request must have Content-Type application/json", r.Method))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses cross-site requests (net/http's CrossOriginProtection) without the
// Content-Type rule of protect: the MCP transport's GET and DELETE carry no body.
func (s *Service) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cop.Check(r); err != nil {
			s.writeError(w, r, apiErr(http.StatusForbidden, httpapi.CodeForbidden, "cross-site request refused"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readBody decodes the JSON body of a mutating request into v; an empty body leaves v
// zero.
func readBody(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apiErr(http.StatusRequestEntityTooLarge, httpapi.CodeInvalidRequest, "request body is larger than %d bytes", mbe.Limit)
		}
		return apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	return strictJSON(data, v)
}

// readTargeted decodes the JSON body of a command whose target the path wildcard names
// into req (as readBody does) and sets *target, req's own field for it, to the path's
// value: a body that names the target too must name the same.
func readTargeted(r *http.Request, wildcard string, req any, target *string) error {
	if err := readBody(r, req); err != nil {
		return err
	}
	v := r.PathValue(wildcard)
	if *target != "" && *target != v {
		return apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "%s in the body differs from the path", wildcard)
	}
	*target = v
	return nil
}

// reply answers r with v as JSON (200 OK), or with err when there is one.
func (s *Service) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// encoding/json escapes <, > and & inside strings (and inside raw arguments), so even
	// a response rendered as HTML by mistake cannot carry markup.
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := asError(err)
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	ev := s.log.Info()
	if e.Status >= 500 {
		ev = s.log.Error().Err(e.Err)
	}
	ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", e.Status).Str("code", e.Code).Msg("api request refused")
	writeJSON(w, e.Status, e)
}
