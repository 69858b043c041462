// Package adaptertest is what the adapters' tests (adapters/openai, adapters/anthropic,
// adapters/eino) share: the deployment they run against, a scripted model server the
// provider SDK talks to (Eino's chat model is an interface, scripted in its own test), and
// the approval that settles a batch. It sits under
// adapters/internal, so Go refuses its import outside adapters/, and only tests import it.
//
// It belongs to awaken's main module (adapters/internal has no go.mod of its own), so the
// adapters' modules reach it through the requirement that gives them pkg/client; it uses
// only public packages and no provider SDK, so each adapter still builds on its own SDK
// alone.
package adaptertest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
)

// Config is the host configuration of the adapters' tests: echo (a Brain tool with a
// text argument) runs at once, ask_me waits for a human's approval.
const Config = `
storage: {memory: true}
tools:
  - id: echo
    description: Returns its text argument.
    target: brain
  - id: ask_me
    description: Runs after a human approves it.
    builtin: ran
policy:
  default_behavior: allow
  rules:
    - {pattern: ask_me, behavior: ask, timeout: 1h}
`

// Stack runs awaken from [Config] on an embedded server for t, with the api's micro
// service for the tool catalog, and returns it with a context that bounds the rest of the
// test to two minutes. The deployment closes when t ends.
func Stack(t *testing.T) (*devserver.Server, context.Context) {
	t.Helper()
	srv := devserver.StartTest(t, devserver.Options{ConfigYAML: []byte(Config), WithAPI: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return srv, ctx
}

// Model is a model server that answers each request with the next scripted reply and
// records the JSON body the SDK sent.
type Model struct {
	// URL is the server's base URL, for the SDK's base-URL option.
	URL string

	t       *testing.T
	path    string
	mu      sync.Mutex
	replies []string
	bodies  []map[string]any
}

// NewModel starts a model server for t that answers the requests to path (every path when
// path is "") with replies, in order; a request beyond them, or to another path, fails t.
// It stops when t ends.
func NewModel(t *testing.T, path string, replies ...string) *Model {
	t.Helper()
	m := &Model{t: t, path: path, replies: replies}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	m.URL = srv.URL
	return m
}

// ServeHTTP answers r with the next scripted reply.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil {
		m.t.Errorf("the SDK sent %s: %v", body, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.replies) == 0 || (m.path != "" && r.URL.Path != m.path) {
		m.t.Errorf("an unscripted request to %s", r.URL.Path)
		http.Error(w, "unscripted", http.StatusInternalServerError)
		return
	}
	m.bodies = append(m.bodies, sent)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, m.replies[0])
	m.replies = m.replies[1:]
}

// Body is the body of the i-th request the server answered (from 0).
func (m *Model) Body(i int) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i >= len(m.bodies) {
		m.t.Fatalf("the model server answered %d requests, not %d", len(m.bodies), i+1)
	}
	return m.bodies[i]
}

// Settle submits sub, approves the ticket of its call askCallID once it is open, and
// waits for the batch's results.
func Settle(ctx context.Context, t *testing.T, c *client.Client, sub contracts.BatchSubmission, askCallID string) *client.BatchResult {
	t.Helper()
	if _, err := c.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	ticket, err := c.WaitTicket(ctx, sub.RunID, sub.Step, askCallID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Approve(ctx, ticket, "fine"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Await(ctx, sub.RunID, sub.Step)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// ForbidDeps fails t when the package in the test's directory (an adapter) compiles a
// package whose import path starts with one of forbidden, naming each and the import
// path that brings it in. A platform building on an adapter compiles what the adapter
// imports and not the rest of its SDK's module (a provider SDK module also carries its
// cloud variants, each with its cloud's SDK), so an import of such a package would cost
// every platform the build of that cloud's SDK.
func ForbidDeps(t *testing.T, forbidden ...string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists the adapter's dependencies: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), goCmd, "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	importedBy := map[string]string{}
	var pkgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkgs = append(pkgs, fields[0])
		for _, imp := range fields[1:] {
			if _, seen := importedBy[imp]; !seen {
				importedBy[imp] = fields[0]
			}
		}
	}
	for _, p := range pkgs {
		for _, f := range forbidden {
			if strings.HasPrefix(p, f) {
				t.Errorf("the adapter compiles %s (imported by %s)", p, importedBy[p])
			}
		}
	}
	if len(pkgs) < 2 {
		t.Fatalf("go list -deps listed %d packages: %s", len(pkgs), out)
	}
}
