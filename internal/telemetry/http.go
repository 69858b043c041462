package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 3 * time.Second

// Handler returns the operations endpoints:
//
//   - GET /metrics — the Prometheus registry of m (404 when m is nil);
//   - GET /healthz — 200 while the process serves HTTP at all (liveness);
//   - GET /readyz  — 200 when ready returns nil (NATS connected, streams ensured,
//     consumers bound), 503 with the reason otherwise.
//
// ready is called per request with a bounded context; nil means always ready.
func Handler(m *Metrics, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("GET /metrics", m.Handler())
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, http.StatusOK, "ok", "")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				writeStatus(w, http.StatusServiceUnavailable, "unavailable", err.Error())
				return
			}
		}
		writeStatus(w, http.StatusOK, "ready", "")
	})
	return mux
}

func writeStatus(w http.ResponseWriter, code int, status, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	body := map[string]string{"status": status}
	if reason != "" {
		body["reason"] = reason
	}
	_ = json.NewEncoder(w).Encode(body)
}

// Server is a running operations listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Serve listens on addr (port 0 picks a free one; see [Server.Addr]) and serves h until
// Shutdown. It returns once the listener is bound, so a caller can report the address.
func Serve(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: listen %s: %w", addr, err)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the bound host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting connections and waits for the requests in flight, bounded by
// ctx. It is safe to call once.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
