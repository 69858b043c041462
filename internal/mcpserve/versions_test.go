package mcpserve_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	mgoclient "github.com/mark3labs/mcp-go/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/internal/mcpserve"
)

// TestProtocolVersions: a client pinned to each protocol version of the pinned go-sdk
// gets it, the official client and mcp-go alike: over stdio every version, over
// Streamable HTTP every version with sessions (a client asking for the sessionless one
// is told the versions the server speaks and initializes a session at the newest), and
// each lists the tools and calls one.
func TestProtocolVersions(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	sessionVersions := mcpserve.SessionVersions()
	if len(sessionVersions) == 0 || slices.Contains(sessionVersions, "2026-07-28") {
		t.Fatalf("session versions %v", sessionVersions)
	}
	for _, v := range mcp.SupportedProtocolVersions() {
		wantHTTP := v
		if !slices.Contains(sessionVersions, v) {
			wantHTTP = sessionVersions[0]
		}
		check := func(name, got string, callEcho func() (string, error)) {
			t.Helper()
			want := v
			if strings.HasSuffix(name, "http") {
				want = wantHTTP
			}
			out, err := callEcho()
			t.Logf("%s asking for %s: negotiated %s, echo %q %v", name, v, got, out, err)
			if got != want || err != nil || out != "v" {
				t.Errorf("%s asking for %s: negotiated %s (want %s), echo %q, %v", name, v, got, want, out, err)
			}
		}
		for _, transport := range []string{"http", "stdio"} {
			var cs *mcp.ClientSession
			var err error
			c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
			if transport == "http" {
				s.awaitSessionPlace(ctx, aliceToken)
				cs, err = c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url("/mcp"),
					HTTPClient: &http.Client{Transport: bearer{aliceToken, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: v})
			} else {
				in, out := s.serveStdioPipes("cli:versions")
				cs, err = c.Connect(ctx, &mcp.IOTransport{Reader: in, Writer: out}, &mcp.ClientSessionOptions{ProtocolVersion: v})
			}
			if err != nil {
				t.Errorf("go-sdk over %s asking for %s: %v", transport, v, err)
				continue
			}
			check("go-sdk over "+transport, cs.InitializeResult().ProtocolVersion, func() (string, error) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "v"}})
				return text(res), err
			})
			_ = cs.Close()

			var mc *mgoclient.Client
			if transport == "http" {
				s.awaitSessionPlace(ctx, aliceToken)
				mc, _ = s.connectMGoHTTP(aliceToken, mgoclient.WithProtocolVersion(v))
			} else {
				mc, _ = s.connectMGoStdio("cli:versions", mgoclient.WithProtocolVersion(v))
			}
			check("mcp-go over "+transport, mc.ProtocolVersion(), func() (string, error) {
				res, err := mgoCall(ctx, mc, "echo", map[string]any{"text": "v"}, nil)
				return mgoText(res), err
			})
			_ = mc.Close()
		}
	}
}
