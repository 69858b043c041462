// Package python holds the Python example of the HTTP api; this test runs it against
// `awaken dev` so the example cannot rot.
package python

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/health"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/cli"
)

// readyWriter is the stdout of `awaken dev`: it closes ready when the ready line appears.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	ready chan struct{}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "awaken dev ready") {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestPythonPlatformLoop runs `awaken dev --secure` (the api connects as its own
// least-privilege NATS user) with an api token on free loopback ports, then
// examples/python/platform_loop.py against it, and checks what the script reports: a
// refusal with the batcher's code, a pending batch, the approved ticket, the batch from
// the run's result stream, every result in model order, and a second step answered in
// one request. Without python3 the test is skipped, unless CI is set: there it fails.
func TestPythonPlatformLoop(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatalf("python3 is required under CI=%s: %v", ci, err)
		}
		t.Skipf("python3 not found (%v); the Python example is not run", err)
	}
	const token = "python-example-token"
	t.Setenv("AWAKEN_API_TOKEN", token)
	if os.Getenv("AWAKEN_LOG_LEVEL") == "" {
		t.Setenv("AWAKEN_LOG_LEVEL", "error")
	}
	httpAddr := natstest.FreeLoopbackAddr(t)
	// The data directory is made here, before the cleanup below is registered, so that the
	// cleanups (last registered, first run) stop `awaken dev` before its store is removed.
	args := []string{"dev", "--secure", "--config", filepath.Join("..", "awaken.yaml"),
		"--data", t.TempDir(), "--listen", natstest.FreeLoopbackAddr(t), "--http", httpAddr}
	ctx, cancel := context.WithCancel(context.Background())
	out := &readyWriter{ready: make(chan struct{})}
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() { exited <- cli.Main(ctx, args, out, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("awaken dev exited %d: %s", code, stderr.String())
		}
	})
	select {
	case <-out.ready:
	case code := <-exited:
		exited <- code
		t.Fatalf("awaken dev exited %d before it was ready: %s%s", code, out, stderr.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("awaken dev not ready within 3 minutes: %s", out)
	}
	base := "http://" + httpAddr
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer pcancel()
	if err := health.Probe(pctx, base+health.ReadinessPath, 5*time.Second); err != nil {
		t.Fatalf("readyz: %v", err)
	}

	cmd := exec.CommandContext(pctx, python, "platform_loop.py", "--url", base)
	cmd.Env = append(os.Environ(), "AWAKEN_API_TOKEN="+token, "PYTHONDONTWRITEBYTECODE=1")
	var pyOut, pyErr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &pyOut, &pyErr
	if err := cmd.Run(); err != nil {
		t.Fatalf("platform_loop.py: %v\nstdout:\n%s\nstderr:\n%s", err, pyOut.String(), pyErr.String())
	}
	got := pyOut.String()
	t.Logf("platform_loop.py:\n%s", got)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	want := []string{
		"tools: ",
		"refused as expected: 400 empty_batch",
		":1: pending",
		"ticket perm.",
		": approved",
		"stream: batch tool-batch:",
		"result c1 echo completed: hello from python",
		"result c2 ask_me completed: ran ask_me",
		"result c3 counter completed: 1",
		":2: published",
		"result c4 echo completed: step two",
		"done",
	}
	// Each expected line in order, none skipped.
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.Contains(l, want[i]) {
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("the script's output lacks %q (in order):\n%s", want[i], got)
	}
}
