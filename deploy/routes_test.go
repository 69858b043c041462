package deploy_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/services/api"
)

// routeCoverage tells which of the api's /v1 routes the requests of a test reached: it
// matches each request with a ServeMux of the api's own route patterns
// ([api.Service.Routes]), so a route added to the api is one this test has no request for
// until someone writes it.
type routeCoverage struct {
	routes []api.Route
	mux    *http.ServeMux

	mu  sync.Mutex
	hit map[string]bool // "METHOD pattern" of each route a request reached
}

func newRouteCoverage(routes []api.Route) *routeCoverage {
	c := &routeCoverage{routes: routes, mux: http.NewServeMux(), hit: map[string]bool{}}
	for _, rt := range routes {
		c.mux.HandleFunc(rt.Method+" "+rt.Path, func(http.ResponseWriter, *http.Request) {})
	}
	return c
}

// saw records a request of method on path (with its query, if any). A request no route
// matches is left out: it reached no route.
func (c *routeCoverage) saw(method, path string) {
	_, pattern := c.mux.Handler(httptest.NewRequest(method, path, nil))
	if pattern == "" {
		return
	}
	c.mu.Lock()
	c.hit[pattern] = true
	c.mu.Unlock()
}

// missing lists the routes no recorded request reached, as "METHOD pattern".
func (c *routeCoverage) missing() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, rt := range c.routes {
		if p := rt.Method + " " + rt.Path; !c.hit[p] {
			out = append(out, p)
		}
	}
	return out
}

// requireEvery fails t for each route no request reached.
func (c *routeCoverage) requireEvery(t *testing.T) {
	t.Helper()
	if len(c.routes) == 0 {
		t.Fatal("the api lists no routes")
	}
	if m := c.missing(); len(m) > 0 {
		t.Errorf("no request of this test reached %d api route(s) — add one, as the api user, with the status it must answer:\n  %s",
			len(m), strings.Join(m, "\n  "))
	}
}

// TestRouteCoverageNamesEachRouteWithoutARequest: the walk fails on exactly the routes
// no request reached — a wildcard path and a query match their pattern, another method
// does not.
func TestRouteCoverageNamesEachRouteWithoutARequest(t *testing.T) {
	c := newRouteCoverage([]api.Route{
		{Method: "GET", Path: "/v1/tickets"}, {Method: "GET", Path: "/v1/tickets/{correlation_id}"},
		{Method: "POST", Path: "/v1/tickets/{correlation_id}/approve"}, {Method: "POST", Path: "/v1/policy/test"},
	})
	c.saw("GET", "/v1/tickets?limit=3")
	c.saw("GET", "/v1/tickets/perm.run-1.1.c1")
	c.saw("GET", "/v1/tickets/perm.run-1.1.c1/approve")
	c.saw("POST", "/v1/nowhere")
	if got, want := strings.Join(c.missing(), ","), "POST /v1/tickets/{correlation_id}/approve,POST /v1/policy/test"; got != want {
		t.Fatalf("missing %s, want %s", got, want)
	}
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"awaken.api.tickets.resolve.*", "awaken.api.tickets.resolve.admin", true},
		{"awaken.api.tickets.resolve.*", "awaken.api.tickets.resolve", false},
		{"awaken.api.tickets.resolve", "awaken.api.tickets.resolve.admin", false},
		{"awaken.api.>", "awaken.api.tools.list", true},
		{"awaken.api.tools.list", "awaken.api.tools.list", true},
	} {
		if got := subjectMatches(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
	}
}

// microCoverage tells which endpoints of the api's micro service the requests of a test
// reached: the endpoints are those the service itself announces ($SRV.INFO), so one added
// later is one this test has no request for until someone writes it.
type microCoverage struct {
	mu       sync.Mutex
	subjects []string // the subjects requested
}

func (c *microCoverage) saw(subject string) {
	c.mu.Lock()
	c.subjects = append(c.subjects, subject)
	c.mu.Unlock()
}

// requireEvery fails t for each endpoint of info no recorded subject matched (an
// endpoint's subject may hold a "*" token: awaken.api.tickets.resolve.*).
func (c *microCoverage) requireEvery(t *testing.T, info micro.Info) {
	t.Helper()
	if len(info.Endpoints) == 0 {
		t.Fatalf("the micro service %s announces no endpoints", info.Name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for _, e := range info.Endpoints {
		if !slices.ContainsFunc(c.subjects, func(s string) bool { return subjectMatches(e.Subject, s) }) {
			missing = append(missing, e.Subject)
		}
	}
	if len(missing) > 0 {
		t.Errorf("no request of this test reached %d micro endpoint(s) — add one, as an operator would send it:\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
}

// subjectMatches reports whether the literal subject matches pattern, whose "*" tokens
// match any one token and a final ">" one or more.
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s) || (tok != "*" && tok != s[i]):
			return false
		}
	}
	return len(p) == len(s)
}
