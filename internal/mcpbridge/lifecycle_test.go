//go:build unix

package mcpbridge_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/mcpbridge"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestLateServer_connectsOnUse: servers that are down at Start (a stdio binary that does
// not exist yet, an HTTP server not yet listening) work as soon as they are there, on the
// next invocation or descriptor request, without waiting for the background loop.
func TestLateServer_connectsOnUse(t *testing.T) {
	log := newCallLog(t)
	binPath := filepath.Join(t.TempDir(), "late-mcp")
	addr := natstest.FreeLoopbackAddr(t)
	b := newBridge(t, []config.MCPServer{
		{Name: "late", Command: binPath, Args: []string{"-log", string(log)}},
		{Name: "web", URL: "http://" + addr + "/"},
	}, mcpbridge.WithRetryInterval(time.Hour))
	if d := b.Descriptors(callCtx(t)); len(d) != 0 {
		t.Fatalf("descriptors %v before any server is up", d)
	}
	if _, err := b.Invoke(callCtx(t), "mcp__late__add", json.RawMessage(`{"a":1,"b":2}`), "op-early"); !contracts.IsUnavailableBeforeDispatch(err) {
		t.Fatalf("call before the server exists: %v, want unavailable before dispatch", err)
	}

	if err := os.Symlink(serverBin, binPath); err != nil {
		t.Fatal(err)
	}
	startHTTPServer(t, addr, log)

	out, err := b.Invoke(callCtx(t), "mcp__late__add", json.RawMessage(`{"a":1,"b":2}`), "op-late")
	if err != nil || out.Text() != "3" {
		t.Fatalf("stdio call once the binary exists: %v %v", out, err)
	}
	var ids []string
	for _, d := range b.Descriptors(callCtx(t)) {
		ids = append(ids, d.ID)
	}
	if !slices.Contains(ids, "mcp__late__add") || !slices.Contains(ids, "mcp__web__add") {
		t.Fatalf("descriptors %v, want the tools of both servers", ids)
	}
	out, err = b.Invoke(callCtx(t), "mcp__web__add", json.RawMessage(`{"a":2,"b":2}`), "op-web")
	if err != nil || out.Text() != "4" {
		t.Fatalf("http call once the server listens: %v %v", out, err)
	}
	if log.count(t, "add op-early") != 0 {
		t.Fatal("the early call reached a server")
	}
}

// TestLateServer_backgroundRetry: the background loop connects a server that came up
// later without any call.
func TestLateServer_backgroundRetry(t *testing.T) {
	log := newCallLog(t)
	addr := natstest.FreeLoopbackAddr(t)
	b := newBridge(t, []config.MCPServer{{Name: "web", URL: "http://" + addr + "/"}},
		mcpbridge.WithRetryInterval(20*time.Millisecond))
	if b.Status()[0].Connected {
		t.Fatal("connected before the server listens")
	}
	startHTTPServer(t, addr, log)
	natstest.WaitFor(t, waitTimeout, func() bool {
		st := b.Status()[0]
		return st.Connected && slices.Contains(st.Tools, "mcp__web__add")
	}, "the background loop to connect the server")
}

// TestToolListChange: a tool the server adds later is invocable at once (an unknown tool
// triggers a relisting) and appears in the descriptors (change notification).
func TestToolListChange(t *testing.T) {
	transports(t, func(t *testing.T, b *mcpbridge.Bridge, log callLog) {
		if _, err := b.Invoke(callCtx(t), "mcp__test__extra", nil, "op-1"); toolErrorKind(err) != contracts.ToolErrorUnknown {
			t.Fatalf("extra before grow: %v, want unknown tool", err)
		}
		if _, err := b.Invoke(callCtx(t), "mcp__test__grow", nil, "op-grow"); err != nil {
			t.Fatal(err)
		}
		out, err := b.Invoke(callCtx(t), "mcp__test__extra", nil, "op-2")
		if err != nil || out.Text() != "extra" {
			t.Fatalf("extra after grow: %v %v", out, err)
		}
		natstest.WaitFor(t, waitTimeout, func() bool { return slices.Contains(b.Status()[0].Tools, "mcp__test__extra") }, "extra in the tool list")
	})
}

// TestConcurrentCalls: calls share one session and each gets its own answer.
func TestConcurrentCalls(t *testing.T) {
	transports(t, func(t *testing.T, b *mcpbridge.Bridge, log callLog) {
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args, _ := json.Marshal(map[string]int{"a": i, "b": 1000})
				out, err := b.Invoke(callCtx(t), "mcp__test__add", args, "op-"+strconv.Itoa(i))
				if err == nil && out.Text() != strconv.Itoa(i+1000) {
					err = errors.New("wrong answer " + out.Text())
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		if got := len(log.lines(t)); got != n {
			t.Errorf("the server saw %d calls, want %d", got, n)
		}
	})
}

// TestClose: Close cancels the call in flight (an execution failure: it was sent),
// terminates the stdio children — a well-behaved one and one that ignores stdin EOF and
// SIGTERM — and the grandchildren they started, and refuses later calls as unavailable
// before dispatch.
func TestClose(t *testing.T) {
	politeLog, stubbornLog := newCallLog(t), newCallLog(t)
	b := mcpbridge.New([]config.MCPServer{
		{Name: "polite", Command: serverBin, Args: []string{"-log", string(politeLog), "-grandchild"}},
		{Name: "stubborn", Command: serverBin, Args: []string{"-log", string(stubbornLog), "-linger", "-grandchild"}},
	}, testLogger(t), mcpbridge.WithTerminateGrace(100*time.Millisecond))
	t.Cleanup(func() { b.Close() })
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	pids := []int{invokeServerPID(t, b, "polite"), invokeServerPID(t, b, "stubborn")}
	grandchildren := []int{grandchildOf(t, politeLog), grandchildOf(t, stubbornLog)}

	errc := make(chan error, 1)
	go func() {
		_, err := b.Invoke(callCtx(t), "mcp__polite__slow", json.RawMessage(`{"ms":60000}`), "op-slow")
		errc <- err
	}()
	natstest.WaitFor(t, waitTimeout, func() bool { return politeLog.count(t, "begin slow op-slow") == 1 }, "the slow call to start")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; toolErrorKind(err) != contracts.ToolErrorExecution {
		t.Fatalf("call in flight at Close: %v (kind %q), want an execution failure", err, toolErrorKind(err))
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("server process %d outlived Close", pid)
		}
	}
	// A grandchild is not ours to reap: its parent died, so init reaps it soon after the
	// kill; it is enough that it dies, whether its parent exited politely or was killed.
	for _, pid := range grandchildren {
		natstest.WaitFor(t, waitTimeout, func() bool { return !processAlive(pid) || isZombie(pid) }, "grandchild "+strconv.Itoa(pid)+" to die")
	}

	if _, err := b.Invoke(callCtx(t), "mcp__polite__add", json.RawMessage(`{"a":1,"b":1}`), "op-late"); !contracts.IsUnavailableBeforeDispatch(err) {
		t.Fatalf("call after Close: %v, want unavailable before dispatch", err)
	}
	if err := b.Start(t.Context()); !errors.Is(err, mcpbridge.ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// invokeServerPID returns the process id of the test server behind server name.
func invokeServerPID(t *testing.T, b *mcpbridge.Bridge, name string) int {
	t.Helper()
	out, err := b.Invoke(callCtx(t), "mcp__"+name+"__pid", nil, "op-pid")
	if err != nil {
		t.Fatalf("pid of %s: %v", name, err)
	}
	pid, err := strconv.Atoi(out.Text())
	if err != nil {
		t.Fatalf("pid output %q", out.Text())
	}
	return pid
}

// grandchildOf returns the grandchild process id a test server started with -grandchild
// logged.
func grandchildOf(t *testing.T, log callLog) int {
	t.Helper()
	for _, line := range log.lines(t) {
		if rest, ok := strings.CutPrefix(line, "grandchild "); ok {
			pid, err := strconv.Atoi(rest)
			if err == nil {
				return pid
			}
		}
	}
	t.Fatal("the test server did not report its grandchild")
	return 0
}

// isZombie reports whether pid has exited but is not reaped yet (Linux /proc).
func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(data), ')')
	return i >= 0 && i+2 < len(data) && data[i+2] == 'Z'
}
