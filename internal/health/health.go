// Package health serves the HTTP listener every awaken process can open for its
// orchestrator: /healthz answers while the process is alive, /readyz only while every
// registered readiness check passes (NATS connected, streams ensured, consumers bound).
// Other handlers — /metrics, debug endpoints — mount on the same listener with
// [Server.Handle], so a container exposes one port for all of its operability surface.
//
// A scratch container has no curl or wget, so [Probe] is the client side of the same
// protocol: `awaken healthcheck URL` calls it and exits 0 only on HTTP 200, which is what
// a Docker or compose health check needs.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Paths of the built-in endpoints.
const (
	// LivenessPath answers 200 as long as the process serves HTTP at all.
	LivenessPath = "/healthz"
	// ReadinessPath answers 200 when every readiness check passes, 503 otherwise.
	ReadinessPath = "/readyz"
)

// DefaultCheckTimeout bounds one evaluation of all readiness checks, so a hung
// dependency makes /readyz answer 503 instead of hanging the orchestrator's probe.
const DefaultCheckTimeout = 2 * time.Second

// Check reports whether one dependency is ready: nil means ready, an error says why not.
// Checks must be safe for concurrent use and should return quickly; they run on every
// /readyz request under a deadline.
type Check func(ctx context.Context) error

// Server is the health listener of one process. Register checks and handlers before or
// after [Server.Start]; all methods are safe for concurrent use.
type Server struct {
	mux *http.ServeMux

	mu     sync.RWMutex
	checks []namedCheck
	srv    *http.Server
	addr   string
	done   chan struct{}

	// CheckTimeout bounds one /readyz evaluation; zero means [DefaultCheckTimeout].
	CheckTimeout time.Duration
}

type namedCheck struct {
	name  string
	check Check
}

// New returns a server with /healthz and /readyz mounted and no readiness checks; with
// none registered the process counts as ready.
func New() *Server {
	s := &Server{mux: http.NewServeMux()}
	s.mux.HandleFunc("GET "+LivenessPath, s.liveness)
	s.mux.HandleFunc("GET "+ReadinessPath, s.readiness)
	return s
}

// Handle mounts h at pattern (http.ServeMux syntax) on the same listener, for example
// the metrics handler at "/metrics".
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// AddCheck registers a readiness check under name; /readyz reports it by that name.
// Registering the same name twice keeps both.
func (s *Server) AddCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, namedCheck{name, c})
}

// Handler returns the server's handler, for tests and for callers that run their own
// http.Server.
func (s *Server) Handler() http.Handler { return s.mux }

// Report is the JSON body of /readyz: the overall status and the failing checks.
type Report struct {
	// Status is "ok" or "unavailable".
	Status string `json:"status"`
	// Failing maps each failing check's name to its error text.
	Failing map[string]string `json:"failing,omitempty"`
}

// Ready runs every check under one deadline and returns the report; the checks run
// concurrently so one slow dependency does not hide the others.
func (s *Server) Ready(ctx context.Context) Report {
	s.mu.RLock()
	checks := slices.Clone(s.checks)
	timeout := s.CheckTimeout
	s.mu.RUnlock()
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { errs[i] = runCheck(ctx, c.check) })
	}
	wg.Wait()
	rep := Report{Status: "ok"}
	for i, err := range errs {
		if err == nil {
			continue
		}
		if rep.Failing == nil {
			rep.Failing = make(map[string]string)
			rep.Status = "unavailable"
		}
		rep.Failing[checks[i].name] = err.Error()
	}
	return rep
}

// runCheck runs c and gives up when ctx ends, so a check that ignores its context
// cannot hang the probe.
func runCheck(ctx context.Context, c Check) error {
	res := make(chan error, 1)
	go func() { res <- c(ctx) }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("check did not answer: %w", ctx.Err())
	}
}

func (s *Server) liveness(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
}

func (s *Server) readiness(w http.ResponseWriter, r *http.Request) {
	rep := s.Ready(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if rep.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(rep)
}

// Start listens on addr (host:port; ":0" picks a free port) and serves in the
// background. It returns the bound address. Start may be called once.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("health: listen %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	s.mu.Lock()
	if s.srv != nil {
		s.mu.Unlock()
		_ = ln.Close()
		return "", errors.New("health: server already started")
	}
	s.srv, s.addr, s.done = srv, ln.Addr().String(), make(chan struct{})
	done := s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns http.ErrServerClosed on Shutdown
	}()
	return ln.Addr().String(), nil
}

// Addr is the bound address after [Server.Start], or "".
func (s *Server) Addr() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.addr
}

// Shutdown stops accepting connections and waits for in-flight requests until ctx ends.
// It is a no-op on a server that was never started.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.RLock()
	srv, done := s.srv, s.done
	s.mu.RUnlock()
	if srv == nil {
		return nil
	}
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("health: shutdown: %w", err)
	}
	<-done
	return nil
}

// ErrNotOK is wrapped by [Probe] when the endpoint answered with a status other than 200.
var ErrNotOK = errors.New("health: endpoint not OK")

// Probe sends GET url and returns nil only for HTTP 200. It is the client of a health
// check in a container without a shell; timeout bounds the whole exchange.
func Probe(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	client := &http.Client{
		// A probe targets one endpoint; following a redirect would check something else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: %s", ErrNotOK, resp.Status, body)
	}
	return nil
}
