package deploy_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
	"github.com/awaken-dev/awaken/pkg/awakentest"
)

func TestMain(m *testing.M) {
	// Before any testcontainers call: there is no registry to pull the Ryuk image from.
	awakentest.DisableRyuk()
	if os.Getenv("AWAKEN_TEST_LOG") == "" {
		tclog.SetDefault(tclog.NewNoopLogger())
	}
	// The secure-deployment tests start the pipeline in this process with the example
	// configuration: its WebAssembly tools are compiled once, outside the race detector.
	os.Exit(sandboxtest.RunWithExampleModules(m, ".."))
}

// engine is the outcome of the one check for a Docker engine and the one image build of
// this test binary: every container test shares them.
var engine struct {
	once     sync.Once
	err      error
	took     time.Duration
	imagesAt time.Time
}

// requireEngine skips the test when there is no Docker engine (failing it instead when
// CI=true, so a CI machine without an engine never passes silently), or in -short mode.
// The first call builds the images from this repository, so the containers run the code
// under test.
func requireEngine(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("container tests are not short (-short)")
	}
	engine.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		p, err := testcontainers.NewDockerProvider()
		if err == nil {
			err = p.Health(ctx)
			_ = p.Close()
		}
		if err != nil {
			engine.err = fmt.Errorf("no Docker engine: %w", err)
			// Printed even without -v, where go test shows no skip reasons.
			fmt.Fprintf(os.Stderr, "deploy: the container tests cannot run: %v\n", engine.err)
			return
		}
		start := time.Now()
		var logs io.Writer
		if os.Getenv("AWAKEN_TEST_LOG") != "" {
			logs = os.Stderr
		}
		if err := awakentest.BuildImages(ctx, awakentest.Images{}, "", logs); err != nil {
			engine.err = fmt.Errorf("build images: %w", err)
			return
		}
		engine.took = time.Since(start)
		fmt.Fprintf(os.Stderr, "deploy: images built in %s\n", engine.took.Round(time.Millisecond))
	})
	if engine.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the container tests cannot run: %v", engine.err)
		}
		t.Skipf("skipping the container tests: %v", engine.err)
	}
}

// run starts a deployment for t and removes it when t ends; on failure the logs of
// every container are printed first.
func run(t *testing.T, o awakentest.Options) *awakentest.Deployment {
	t.Helper()
	requireEngine(t)
	ctx := ctxFor(t, 5*time.Minute)
	start := time.Now()
	d, err := awakentest.Run(ctx, o)
	if err != nil {
		t.Fatalf("awakentest.Run: %v", err)
	}
	t.Logf("deployment up in %s (%d NATS nodes, services %v)", time.Since(start).Round(time.Millisecond), len(d.Nodes()), d.Services())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		show := t.Failed() || os.Getenv("AWAKEN_TEST_LOG") != ""
		// AWAKEN_TEST_LOG_DIR keeps every container's whole log beyond the test, passed or
		// not (a slow failover is read from the nats-server and service logs side by side).
		dir := os.Getenv("AWAKEN_TEST_LOG_DIR")
		if dir != "" {
			dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Logf("log dir: %v", err)
				dir = ""
			}
		}
		if show || dir != "" {
			for _, n := range append(d.Nodes(), d.Services()...) {
				logs, _ := d.Logs(ctx, n)
				if dir != "" {
					if err := os.WriteFile(filepath.Join(dir, n+".log"), []byte(logs), 0o644); err != nil {
						t.Logf("keep log of %s: %v", n, err)
					}
				}
				if show {
					t.Logf("=== logs of %s\n%s", n, tail(logs, 60))
				}
			}
			if dir != "" {
				t.Logf("whole logs kept in %s", dir)
			}
		}
		if err := d.Terminate(ctx); err != nil {
			t.Errorf("terminate: %v", err)
		}
	})
	return d
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}
