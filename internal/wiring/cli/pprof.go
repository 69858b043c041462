package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"
)

// servePprof serves the Go runtime's profiles (/debug/pprof/: heap, CPU, goroutines) on
// addr, a loopback address, for as long as the process runs, and returns the address it
// listens on. It is opt-in
// (AWAKEN_PPROF): profiles name every goroutine's code path and take CPU while one is
// recorded, so they are never served by default nor beside the api.
func servePprof(addr string, log zerolog.Logger) (net.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("AWAKEN_PPROF %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("AWAKEN_PPROF %q: %w", addr, errPprofNotLoopback)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("AWAKEN_PPROF: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	log.Info().Str("address", l.Addr().String()).Msg("profiles served on /debug/pprof/ (AWAKEN_PPROF)")
	return l.Addr(), nil
}

var errPprofNotLoopback = errors.New("profiles are served on a loopback address only")
