package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/services/api"
)

// TestCrossSiteRequestsAreRefused: a mutating request that a cross-site page could send —
// a form post, a text/plain fetch, a fetch flagged cross-site or same-site by the browser,
// a foreign or opaque Origin, or a DNS-rebound Host — is refused before it reaches the
// gate, and the ticket stays open; the same request from the console's own origin works.
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	h := newHarness(t, api.Options{})
	tk := h.park("run-csrf", map[string]string{})
	path := "/v1/tickets/" + tk.CorrelationID + "/approve"
	host := strings.TrimPrefix(h.base, "http://")
	tests := []struct {
		name       string
		body       string
		headers    map[string]string
		wantStatus int
		wantCode   string
	}{
		{"cross-site fetch", "{}", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403, "forbidden"},
		{"same-site sibling", "{}", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost"}, 403, "forbidden"},
		{"foreign origin from an old browser", "{}", map[string]string{"Origin": "https://evil.example"}, 403, "forbidden"},
		{"opaque origin", "{}", map[string]string{"Origin": "null"}, 403, "forbidden"},
		{"form post", "note=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"multipart form post", "x", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"},
		{"text/plain fetch", "{}", map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"no content type", "{}", map[string]string{"Content-Type": ""}, 415, "unsupported_media_type"},
		{"DNS rebinding", "{}", map[string]string{"Host": "evil.example:" + strings.Split(host, ":")[1],
			"Origin": "http://evil.example:" + strings.Split(host, ":")[1], "Sec-Fetch-Site": "same-origin"}, 403, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(http.MethodPost, path, tt.body, tt.headers)
			if e := r.apiError(t); r.status != tt.wantStatus || e.Code != tt.wantCode {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.wantStatus, tt.wantCode)
			}
		})
	}
	if _, err := h.client.Ticket(ctxFor(t, waitLong), tk.CorrelationID); err != nil {
		t.Fatalf("a refused request touched the ticket: %v", err)
	}
	// Reads from a rebound host are refused too: they would leak tool arguments.
	r := h.do(http.MethodGet, "/v1/tickets", "", map[string]string{"Host": "evil.example"})
	if r.status != http.StatusForbidden {
		t.Fatalf("GET from a foreign host: %d", r.status)
	}
	r = h.do(http.MethodPost, path, `{"note":"from the console"}`, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": h.base})
	if r.status != http.StatusOK {
		t.Fatalf("same-origin approve: %d %s", r.status, r.body)
	}
	// The MCP route: a cross-site request (a page posting to a local awaken) and a
	// rebound host are refused before the MCP server sees them.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, headers := range map[string]map[string]string{
		"cross-site MCP": {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"rebound MCP":    {"Host": "evil.example"},
	} {
		if r := h.do(http.MethodPost, "/mcp", initialize, headers); r.status != http.StatusForbidden {
			t.Fatalf("%s: %d %s", name, r.status, r.body)
		}
	}
}

// TestTokenAuth: with a token configured, every /v1 request and /metrics (which names tools
// and counts batches and tickets) need it as a bearer token; the console's static shell,
// /healthz and /readyz do not.
func TestTokenAuth(t *testing.T) {
	const token = "s3cret-token"
	h := newHarness(t, api.Options{Token: token})
	tk := h.park("run-auth", map[string]string{})
	bearer := map[string]string{"Authorization": "Bearer " + token}
	tests := []struct {
		name, method, path, body string
		headers                  map[string]string
		wantStatus               int
	}{
		{"list without token", "GET", "/v1/tickets", "", nil, 401},
		{"list with a wrong token", "GET", "/v1/tickets", "", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"list with a token prefix", "GET", "/v1/tickets", "", map[string]string{"Authorization": "Bearer s3cret"}, 401},
		{"list with basic auth", "GET", "/v1/tickets", "", map[string]string{"Authorization": "Basic " + token}, 401},
		{"approve without token", "POST", "/v1/tickets/" + tk.CorrelationID + "/approve", "{}", nil, 401},
		{"stream without token", "GET", "/v1/stream", "", nil, 401},
		{"batches without token", "GET", "/v1/batches", "", nil, 401},
		{"list with token", "GET", "/v1/tickets", "", bearer, 200},
		{"list with lower-case scheme", "GET", "/v1/tickets", "", map[string]string{"Authorization": "bearer " + token}, 200},
		{"console shell", "GET", "/", "", nil, 200},
		{"console script", "GET", "/console.js", "", nil, 200},
		{"health", "GET", "/healthz", "", nil, 200},
		{"readiness", "GET", "/readyz", "", nil, 200},
		{"metrics without token", "GET", "/metrics", "", nil, 401},
		{"metrics with a wrong token", "GET", "/metrics", "", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"metrics with token", "GET", "/metrics", "", bearer, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(tt.method, tt.path, tt.body, tt.headers)
			if r.status != tt.wantStatus {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.wantStatus)
			}
			if r.status == http.StatusUnauthorized {
				if e := r.apiError(t); e.Code != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
					t.Fatalf("401 without code or challenge: %v %s", r.header, r.body)
				}
			}
		})
	}
	if _, err := h.client.Ticket(ctxFor(t, waitLong), tk.CorrelationID); err != nil {
		t.Fatalf("an unauthenticated approve touched the ticket: %v", err)
	}
	r := h.do(http.MethodPost, "/v1/tickets/"+tk.CorrelationID+"/approve", "{}", bearer)
	if r.status != http.StatusOK {
		t.Fatalf("authenticated approve: %d %s", r.status, r.body)
	}
}

// TestProbesLeakNothingWithoutTheToken: the probes answer without credentials, as
// orchestrators call them, but a failing readiness check's reason (which names internals)
// goes only to a caller holding the token; --metrics-public serves /metrics without it.
func TestProbesLeakNothingWithoutTheToken(t *testing.T) {
	const token = "s3cret-token"
	const secret = "consumer gate-batches of KV_AWAKEN_runs is not bound"
	h := newHarness(t, api.Options{Token: token, PublicMetrics: true,
		Ready: func(context.Context) error { return errors.New(secret) }})
	r := h.do("GET", "/readyz", "", nil)
	if r.status != http.StatusServiceUnavailable || strings.Contains(string(r.body), "gate-batches") {
		t.Fatalf("unauthenticated /readyz: %d %s, want 503 without the reason", r.status, r.body)
	}
	r = h.do("GET", "/readyz", "", map[string]string{"Authorization": "Bearer " + token})
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), secret) {
		t.Fatalf("authenticated /readyz: %d %s, want 503 with the reason", r.status, r.body)
	}
	if r := h.do("GET", "/metrics", "", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "awaken_") {
		t.Fatalf("public /metrics without token: %d %s", r.status, r.body)
	}
}

// TestHostAllowList: on a loopback bind the api answers loopback names (any spelling) and
// the configured allowed hosts, nothing else.
func TestHostAllowList(t *testing.T) {
	h := newHarness(t, api.Options{AllowedHosts: []string{"console.example"}})
	tests := []struct {
		host string
		want int
	}{
		{"localhost", 200},
		{"LOCALHOST.", 200},
		{"app.localhost:8080", 200},
		{"127.0.0.1:8080", 200},
		{"127.0.0.2", 200},
		{"[::1]:8080", 200},
		{"console.example", 200},
		{"Console.Example:443", 200},
		{"evil.example", 403},
		{"localhost.evil.example", 403},
		{"console.example.evil", 403},
		{"10.0.0.1", 403},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			r := h.do(http.MethodGet, "/v1/tickets", "", map[string]string{"Host": tt.host})
			if r.status != tt.want {
				t.Fatalf("Host %s: %d %s, want %d", tt.host, r.status, r.body, tt.want)
			}
		})
	}
}
