package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeRoundTripper answers every request with resp or err.
type fakeRoundTripper struct {
	resp *http.Response
	err  error
}

func (f fakeRoundTripper) RoundTrip(*http.Request) (*http.Response, error) { return f.resp, f.err }

func postRequest(t *testing.T, ctx context.Context, body string, session string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://mcp.invalid/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if session != "" {
		req.Header.Set(sessionIDHeader, session)
	}
	return req
}

const (
	toolCallBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add"}}`
	cancelBody   = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`
	listBody     = `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`
)

func status(code int) *http.Response {
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(""))}
}

func TestProbeRoundTripper(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name     string
		body     string
		session  string
		base     fakeRoundTripper
		attempts int
		reached  bool
	}{
		{"dial failure sent nothing", toolCallBody, "s", fakeRoundTripper{err: dial}, 1, false},
		{"dns failure sent nothing", toolCallBody, "", fakeRoundTripper{err: fmt.Errorf("post: %w", &net.DNSError{Err: "no such host", Name: "x"})}, 1, false},
		{"eof after the request was written", toolCallBody, "s", fakeRoundTripper{err: fmt.Errorf("post: %w", io.EOF)}, 1, true},
		{"connection reset while reading", toolCallBody, "s", fakeRoundTripper{err: &net.OpError{Op: "read", Err: errors.New("reset")}}, 1, true},
		{"404 for a known session: the server refused it", toolCallBody, "s", fakeRoundTripper{resp: status(404)}, 1, false},
		{"404 without a session proves nothing", toolCallBody, "", fakeRoundTripper{resp: status(404)}, 1, true},
		{"ok", toolCallBody, "s", fakeRoundTripper{resp: status(200)}, 1, true},
		{"server error after delivery", toolCallBody, "s", fakeRoundTripper{resp: status(503)}, 1, true},
		{"cancellation notification is not the call", cancelBody, "s", fakeRoundTripper{resp: status(202)}, 0, false},
		{"another request is not the call", listBody, "s", fakeRoundTripper{err: io.EOF}, 0, false},
		{"unreadable body counts as the call", `{not json`, "s", fakeRoundTripper{err: io.EOF}, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &probe{}
			resp, _ := probeRoundTripper{base: tc.base}.RoundTrip(postRequest(t, withProbe(t.Context(), p), tc.body, tc.session))
			if resp != nil {
				resp.Body.Close()
			}
			if p.attempts != tc.attempts || p.mayHaveReachedServer() != tc.reached {
				t.Fatalf("attempts %d reached %v, want %d %v", p.attempts, p.mayHaveReachedServer(), tc.attempts, tc.reached)
			}
		})
	}
}

// TestProbeRoundTripper_realDialFailure checks the dial-error rule against net/http's real
// error chain, not a hand-made one.
func TestProbeRoundTripper_realDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &probe{}
	client := &http.Client{Transport: probeRoundTripper{base: newHTTPTransport()}}
	req, _ := http.NewRequestWithContext(withProbe(t.Context(), p), http.MethodPost, "http://"+addr+"/", strings.NewReader(toolCallBody))
	if _, err := client.Do(req); err == nil {
		t.Fatal("posting to a closed port succeeded")
	}
	if p.attempts != 1 || p.mayHaveReachedServer() {
		t.Fatalf("attempts %d reached %v, want one attempt that provably sent nothing", p.attempts, p.mayHaveReachedServer())
	}
}

// fakeConn is an SDK connection whose Write puts n bytes into the child's stdin counter
// and returns err.
type fakeConn struct {
	mcp.Connection
	child *childProcess
	n     int64
	err   error
}

func (c fakeConn) Write(context.Context, jsonrpc.Message) error {
	c.child.written.Add(c.n)
	return c.err
}

func TestProbedStdioConn(t *testing.T) {
	call := &jsonrpc.Request{ID: mustID(t, 1), Method: methodCallTool}
	notification := &jsonrpc.Request{Method: "notifications/cancelled"}
	list := &jsonrpc.Request{ID: mustID(t, 2), Method: "tools/list"}
	tests := []struct {
		name     string
		msg      jsonrpc.Message
		n        int64
		err      error
		attempts int
		reached  bool
	}{
		{"write failed before any byte", call, 0, errors.New("broken pipe"), 1, false},
		{"partial write", call, 10, errors.New("broken pipe"), 1, true},
		{"complete write", call, 70, nil, 1, true},
		{"zero bytes but no error (batched)", call, 0, nil, 1, true},
		{"notification", notification, 0, errors.New("broken pipe"), 0, false},
		{"other request", list, 0, errors.New("broken pipe"), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			child := &childProcess{}
			child.written.Add(123) // earlier traffic
			conn := &probedStdioConn{Connection: fakeConn{child: child, n: tc.n, err: tc.err}, stdin: child}
			p := &probe{}
			_ = conn.Write(withProbe(t.Context(), p), tc.msg)
			if p.attempts != tc.attempts || p.mayHaveReachedServer() != tc.reached {
				t.Fatalf("attempts %d reached %v, want %d %v", p.attempts, p.mayHaveReachedServer(), tc.attempts, tc.reached)
			}
		})
	}
}

func TestProbe_attemptInProgressMayHaveReached(t *testing.T) {
	p := &probe{}
	if p.mayHaveReachedServer() {
		t.Fatal("no attempt yet, yet reached")
	}
	p.begin()
	if !p.mayHaveReachedServer() {
		t.Fatal("an attempt in progress must count as possibly delivered")
	}
	p.refused()
	p.begin()
	if !p.mayHaveReachedServer() {
		t.Fatal("a second attempt without proof must count as possibly delivered")
	}
}

func mustID(t *testing.T, n int64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
