// Command mcpserver is the MCP server the mcpbridge tests run as a real child process or
// HTTP server. It is built once per test binary (see TestMain) from the go-sdk, so the
// bridge is exercised against the SDK's own server, not a fake.
//
// Tools:
//
//	add {a, b}      text: the sum
//	fail {}         an IsError result
//	image {}        one PNG image
//	slow {ms}       sleeps ms milliseconds (honouring cancellation), then "slept {ms}ms"
//	echo_meta {}    text: the awaken/operation_id found in the request _meta
//	meta {}         text: the request's whole _meta as JSON; logged as
//	                "meta {operation id} {io.awaken/idempotency-key} {traceparent}";
//	                annotated read-only, idempotent, closed world (replay-safe when trusted)
//	structured {}   structured content only, no content blocks
//	resource {}     an embedded text resource
//	pid {}          text: the server's process id
//	grow {}         adds the tool "extra" (text "extra"), which notifies a tool list change
//	progress {steps, ms}  sends notifications/progress i of steps, ms apart, for the
//	                request's progressToken, then "progressed {steps} steps (token: yes|no)"
//	charge {amount} records a charge under the request's io.awaken/idempotency-key (a
//	                repeated key charges nothing more), text "charged {amount}"; logged
//	                "charge {key} {amount}"
//	charge_status {amount}  the reconcile companion of charge: the JSON answer
//	                {"outcome":"ran","output":"charged {amount}"} when the request's key
//	                was charged, {"outcome":"not_run"} when not; logged
//	                "charge_status {key} {outcome}"
//
// With -annotated, three more tools carry MCP annotations (each returns its name):
//
//	lookup {}       readOnlyHint true
//	wipe {}         destructiveHint true
//	upsert {}       idempotentHint true, openWorldHint false, destructiveHint false
//
// Flags: -http addr serves streamable HTTP on addr (stdio otherwise) and prints
// "listening {addr}" on stdout once the listener is open; -log file appends one line per
// call ("{tool} {operation id}") and "begin slow {operation id}" when slow starts, so tests
// can prove which calls the server saw without sleeping. -linger makes a stdio server
// ignore SIGTERM and keep running after its stdin closed (a stubborn server that must be
// killed); -grandchild starts a long-running child process in the server's process group
// and logs "grandchild {pid}".
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tinyPNG is a 1×1 transparent PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="

type callLog struct {
	mu   sync.Mutex
	path string
}

func (l *callLog) add(format string, args ...any) {
	if l.path == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		log.Printf("call log: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

func operationID(req *mcp.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	id, _ := req.Params.Meta["awaken/operation_id"].(string)
	return id
}

type addArgs struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type slowArgs struct {
	MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}

type progressArgs struct {
	Steps int `json:"steps" jsonschema:"how many steps to report"`
	MS    int `json:"ms" jsonschema:"milliseconds between two steps"`
}

type chargeArgs struct {
	Amount int `json:"amount" jsonschema:"the amount to charge"`
}

type none struct{}

// addAnnotated adds the tools of -annotated.
func addAnnotated(s *mcp.Server, calls *callLog) {
	yes, no := true, false
	for _, t := range []*mcp.Tool{
		{Name: "lookup", Description: "Reads.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "wipe", Description: "Destroys.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		{Name: "upsert", Description: "Writes idempotently in a closed world.",
			Annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: &no, DestructiveHint: &no}},
	} {
		name := t.Name
		mcp.AddTool(s, t, func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			calls.add("%s %s", req.Params.Name, operationID(req))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
	}
}

func newServer(calls *callLog) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "awaken-test", Version: "1.0.0"}, nil)
	record := func(req *mcp.CallToolRequest) { calls.add("%s %s", req.Params.Name, operationID(req)) }

	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, req *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, any, error) {
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: strconv.FormatFloat(a.A+a.B, 'f', -1, 64)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "metered", Description: "Reports in the result's _meta what the call cost."},
		func(_ context.Context, req *mcp.CallToolRequest, a meteredArgs) (*mcp.CallToolResult, any, error) {
			record(req)
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "metered"}}}
			res.Meta = mcp.Meta{"io.awaken/cost": a.Cost}
			return res, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			record(req)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "deliberate failure"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "Returns a tiny PNG."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			record(req)
			data, _ := base64.StdEncoding.DecodeString(tinyPNG)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a pixel"},
				&mcp.ImageContent{MIMEType: "image/png", Data: data},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sleeps."},
		func(ctx context.Context, req *mcp.CallToolRequest, a slowArgs) (*mcp.CallToolResult, any, error) {
			calls.add("begin slow %s", operationID(req))
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("slept %dms", a.MS)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo_meta", Description: "Echoes the awaken operation id."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: operationID(req)}}}, nil, nil
		})
	var chargesMu sync.Mutex
	charges := map[string]int{}
	idempotencyKey := func(req *mcp.CallToolRequest) string {
		key, _ := req.Params.Meta["io.awaken/idempotency-key"].(string)
		return key
	}
	mcp.AddTool(s, &mcp.Tool{Name: "charge", Description: "Charges once per idempotency key."},
		func(_ context.Context, req *mcp.CallToolRequest, a chargeArgs) (*mcp.CallToolResult, any, error) {
			key := idempotencyKey(req)
			chargesMu.Lock()
			if _, ok := charges[key]; !ok {
				charges[key] = a.Amount
			}
			chargesMu.Unlock()
			calls.add("charge %s %d", key, a.Amount)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("charged %d", a.Amount)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "charge_status", Description: "Reconciles charge."},
		func(_ context.Context, req *mcp.CallToolRequest, a chargeArgs) (*mcp.CallToolResult, any, error) {
			key := idempotencyKey(req)
			chargesMu.Lock()
			amount, ok := charges[key]
			chargesMu.Unlock()
			answer := `{"outcome":"not_run"}`
			if ok {
				answer = fmt.Sprintf(`{"outcome":"ran","output":"charged %d"}`, amount)
			}
			outcome := map[bool]string{true: "ran", false: "not_run"}[ok]
			calls.add("charge_status %s %s", key, outcome)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer}}}, nil, nil
		})
	closed := false
	mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Echoes the request _meta.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closed}},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			meta := req.Params.Meta
			key, _ := meta["io.awaken/idempotency-key"].(string)
			parent, _ := meta["traceparent"].(string)
			calls.add("meta %s %s %s", operationID(req), key, parent)
			b, err := json.Marshal(meta)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "structured", Description: "Structured content only.",
		InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"answer": 42}}, nil
		})
	// graph answers as the go-sdk's memory server's read_graph does: a status text and the
	// data only in structuredContent.
	s.AddTool(&mcp.Tool{Name: "graph", Description: "Reads the knowledge graph.",
		InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			return &mcp.CallToolResult{
				Content: []mcp.Content{&mcp.TextContent{Text: "Graph read successfully"}},
				StructuredContent: map[string]any{"entities": []any{
					map[string]any{"name": "Ada", "entityType": "person", "observations": []string{"wrote the first program"}},
				}},
			}, nil
		})
	// "greet (structured)" has a name no model provider accepts, as the go-sdk's
	// everything server's tools do; its schema has an optional property.
	s.AddTool(&mcp.Tool{Name: "greet (structured)", Description: "Greets by name.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"name": map[string]any{"type": "string"}, "title": map[string]any{"type": "string"}}, "required": []string{"name"}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			var a struct{ Name string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + a.Name}}}, nil
		})
	// "lookup (structured)" has a name no model provider accepts and answers in
	// structuredContent, as the go-sdk's everything server's structured-content tool does.
	s.AddTool(&mcp.Tool{Name: "lookup (structured)", Description: "Looks a city up.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"}}, "required": []string{"city"}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			var a struct{ City string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{},
				StructuredContent: map[string]any{"city": a.City, "temperature": 21.5, "conditions": []any{"sunny"}}}, nil
		})
	// every returns one content item of every kind MCP defines, and structured content.
	s.AddTool(&mcp.Tool{Name: "every", Description: "Returns every kind of content.",
		InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			png, _ := base64.StdEncoding.DecodeString(tinyPNG)
			size := int64(5)
			return &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.TextContent{Text: "all of it"},
					&mcp.ImageContent{MIMEType: "image/png", Data: png},
					&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF\x00")},
					&mcp.ResourceLink{URI: "file:///data.csv", Name: "data.csv", Title: "The data", MIMEType: "text/csv", Size: &size},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "remember"}},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///blob.bin", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
				},
				StructuredContent: map[string]any{"count": 6},
			}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "resource", Description: "Returns an embedded text resource."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{
				Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "remember"}}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "Returns the process id."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Reports progress, then returns."},
		func(ctx context.Context, req *mcp.CallToolRequest, a progressArgs) (*mcp.CallToolResult, any, error) {
			record(req)
			token := req.Params.GetProgressToken()
			for i := 1; i <= a.Steps; i++ {
				select {
				case <-time.After(time.Duration(a.MS) * time.Millisecond):
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				if token != nil {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
						Progress: float64(i), Total: float64(a.Steps), Message: fmt.Sprintf("step %d of %d", i, a.Steps)}); err != nil {
						return nil, nil, err
					}
				}
			}
			has := "no"
			if token != nil {
				has = "yes"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("progressed %d steps (token: %s)", a.Steps, has)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds the tool extra."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			record(req)
			mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "Added at run time."},
				func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
					record(req)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "extra"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
	return s
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	logPath := flag.String("log", "", "append one line per call to this file")
	linger := flag.Bool("linger", false, "ignore SIGTERM and keep running after stdin closes")
	grandchild := flag.Bool("grandchild", false, "start a long-running child process")
	annotated := flag.Bool("annotated", false, "add the annotated tools lookup, wipe and upsert")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("mcpserver: ")
	calls := &callLog{path: *logPath}
	if *linger {
		signal.Ignore(syscall.SIGTERM)
	}
	if *grandchild {
		child := exec.Command("sleep", "3600")
		if err := child.Start(); err != nil {
			log.Fatal(err)
		}
		calls.add("grandchild %d", child.Process.Pid)
	}
	s := newServer(calls)
	if *annotated {
		addAnnotated(s, calls)
	}
	if *addr == "" {
		err := s.Run(context.Background(), &mcp.StdioTransport{})
		for *linger {
			time.Sleep(time.Hour) // stubborn on purpose: only SIGKILL ends it
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	log.Fatal(http.Serve(ln, handler))
}

// meteredArgs are the arguments of metered: the cost it reports.
type meteredArgs struct {
	Cost float64 `json:"cost"`
}
