package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/health"
)

func TestReadiness(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("nats disconnected") }
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	ignoresCtx := func(context.Context) error { <-release; return nil }
	tests := []struct {
		name    string
		checks  map[string]health.Check
		status  int
		failing []string
	}{
		{"no checks means ready", nil, http.StatusOK, nil},
		{"all checks pass", map[string]health.Check{"nats": ok, "stack": ok}, http.StatusOK, nil},
		{"one failing check", map[string]health.Check{"nats": down, "stack": ok}, http.StatusServiceUnavailable, []string{"nats"}},
		{"a hung check times out", map[string]health.Check{"stack": hang}, http.StatusServiceUnavailable, []string{"stack"}},
		{"a check that ignores its context still times out", map[string]health.Check{"stack": ignoresCtx, "nats": down}, http.StatusServiceUnavailable, []string{"nats", "stack"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := health.New()
			s.CheckTimeout = 200 * time.Millisecond
			for n, c := range tc.checks {
				s.AddCheck(n, c)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, health.ReadinessPath, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.status, rec.Body)
			}
			var rep health.Report
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Failing) != len(tc.failing) {
				t.Fatalf("failing %v, want %v", rep.Failing, tc.failing)
			}
			for _, n := range tc.failing {
				if _, ok := rep.Failing[n]; !ok {
					t.Errorf("check %q not reported failing: %v", n, rep.Failing)
				}
			}
			// Liveness does not depend on the checks.
			rec = httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, health.LivenessPath, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("liveness %d", rec.Code)
			}
		})
	}
}

func TestServerMountsMoreHandlersAndProbes(t *testing.T) {
	s := health.New()
	s.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "awaken_up 1\n")
	}))
	ready := make(chan struct{})
	s.AddCheck("started", func(context.Context) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("starting")
		}
	})
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	base := "http://" + addr
	ctx := context.Background()

	tests := []struct {
		name    string
		path    string
		before  func()
		wantErr error // nil means the probe succeeds
	}{
		{"liveness while starting", health.LivenessPath, nil, nil},
		{"readiness while starting", health.ReadinessPath, nil, health.ErrNotOK},
		{"unknown path", "/nope", nil, health.ErrNotOK},
		{"mounted handler", "/metrics", nil, nil},
		{"readiness once started", health.ReadinessPath, func() { close(ready) }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			err := health.Probe(ctx, base+tc.path, 5*time.Second)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("probe: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("probe error %v, want %v", err, tc.wantErr)
			}
		})
	}

	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	err = health.Probe(ctx, base+health.LivenessPath, 2*time.Second)
	if err == nil || errors.Is(err, health.ErrNotOK) {
		t.Errorf("probe of a stopped server: %v, want a connection error", err)
	}
}

func TestProbeDoesNotFollowRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			return
		}
		http.Redirect(w, r, "/ok", http.StatusFound)
	}))
	defer srv.Close()
	err := health.Probe(context.Background(), srv.URL+"/readyz", 2*time.Second)
	if !errors.Is(err, health.ErrNotOK) || !strings.Contains(err.Error(), "302") {
		t.Fatalf("probe of a redirect: %v", err)
	}
}
