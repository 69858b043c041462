//go:build unix

package mcpbridge_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/mcpbridge"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// serverBin is the test MCP server (testdata/mcpserver), built once by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcpbridge-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBin = filepath.Join(dir, "mcpserver")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	build := exec.Command(goTool, "build", "-o", serverBin, "./testdata/mcpserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test MCP server:", err)
		return 1
	}
	return m.Run()
}

// waitTimeout bounds every wait on a condition; generous for a loaded 2-core machine.
const waitTimeout = 30 * time.Second

// callLog is the file the test server appends one line per call to.
type callLog string

func newCallLog(t *testing.T) callLog { return callLog(filepath.Join(t.TempDir(), "calls.log")) }

// lines returns the lines logged so far.
func (l callLog) lines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(string(l))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// count returns how many logged lines equal line.
func (l callLog) count(t *testing.T, line string) int {
	n := 0
	for _, got := range l.lines(t) {
		if got == line {
			n++
		}
	}
	return n
}

// stdioServer is the configuration entry of the test server on stdio.
func stdioServer(name string, log callLog) config.MCPServer {
	return config.MCPServer{Name: name, Command: serverBin, Args: []string{"-log", string(log)}}
}

// httpServer is a running test server on streamable HTTP.
type httpServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// startHTTPServer runs the test server on addr ("127.0.0.1:0" for any port) and waits
// until it listens.
func startHTTPServer(t *testing.T, addr string, log callLog) *httpServer {
	t.Helper()
	cmd := exec.Command(serverBin, "-http", addr, "-log", string(log))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &httpServer{cmd: cmd, done: make(chan struct{})}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("test server did not start: %v", err)
	}
	h.addr = strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	go func() {
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(h.kill)
	return h
}

func (h *httpServer) url() string { return "http://" + h.addr + "/" }

// kill stops the server abruptly and waits until it is gone.
func (h *httpServer) kill() {
	h.cmd.Process.Kill()
	<-h.done
}

// newBridge starts a bridge over servers with test-sized timeouts and closes it at the
// end of the test.
func newBridge(t *testing.T, servers []config.MCPServer, opts ...mcpbridge.Option) *mcpbridge.Bridge {
	t.Helper()
	opts = append([]mcpbridge.Option{
		mcpbridge.WithConnectTimeout(20 * time.Second),
		mcpbridge.WithTerminateGrace(2 * time.Second),
	}, opts...)
	b := mcpbridge.New(servers, testLogger(t), opts...)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

// callCtx bounds one invocation.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// toolErrorKind returns the kind of the *contracts.ToolError in err, or "" if none.
func toolErrorKind(err error) contracts.ToolErrorKind {
	var te *contracts.ToolError
	if errors.As(err, &te) {
		return te.Kind
	}
	return ""
}

// processAlive reports whether pid names a live (not yet reaped or zombie-free) process.
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// testStack is a stack of services on its own test server, with a client of it and the
// JetStream context of the client's connection.
type testStack struct {
	*stacktest.Stack
	js     jetstream.JetStream
	client *client.Client
}

// startStack starts the services opts names (the pipeline when it names none) on a new
// test server (see [stacktest.Server.StartStack]: logging to the test, the api's HTTP on a
// free port when it is named) and connects a client. The test's cleanup stops the stack
// before the server.
func startStack(ctx context.Context, t *testing.T, opts app.Options) testStack {
	t.Helper()
	srv := stacktest.NewServer(t)
	return testStack{Stack: srv.StartStack(ctx, opts), js: srv.JS, client: srv.Client}
}

// withAPI is the pipeline's five services and the api.
func withAPI() []string { return append(app.AllServices(), contracts.ServiceAPI) }

// crashOnceInTool is a fault hook that fails the first run inside the tool of every
// operation crash selects, as an executor dying in the tool's body would.
func crashOnceInTool(crash func(op string) bool) pipeline.FaultHook {
	var crashed sync.Map
	return func(_ context.Context, _ string, point pipeline.FaultPoint, op string) error {
		if point != pipeline.FaultInTool || !crash(op) {
			return nil
		}
		if _, again := crashed.LoadOrStore(op, true); again {
			return nil
		}
		return errors.New("injected crash inside the tool")
	}
}

// waitCapability waits until the catalog lists toolID with capability want. brain-exec
// publishes its descriptors once its MCP server answered, and each process's view of them
// follows by a KV watch: the catalog shows what the api's view says, and the batcher and
// the gate of this stack share that view.
func (s testStack) waitCapability(t *testing.T, toolID string, want contracts.ToolRecoveryCapability) {
	t.Helper()
	natstest.WaitFor(t, waitTimeout, func() bool {
		tools, err := s.client.Tools(callCtx(t))
		return err == nil && slices.ContainsFunc(tools, func(tl contracts.CatalogTool) bool {
			return tl.ID == toolID && tl.Capability == want
		})
	}, fmt.Sprintf("the catalog to list %s with capability %s", toolID, want))
}
