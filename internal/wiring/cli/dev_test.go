package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/devstack"
)

// TestDevSyncLevel: `awaken dev` states its durability level when it is ready (always by
// default, lazy on request) and refuses a level it does not know. Its log is JSON lines
// when stderr is not a terminal, the console format with --log-format console.
func TestDevSyncLevel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		console bool
	}{
		{"default", nil, "sync always", false},
		{"lazy", []string{"--sync", "lazy", "--log-format", "console"}, "sync lazy", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			wantCache := filepath.Join(data, devstack.DefaultCacheDir)
			if shared := os.Getenv(config.EnvSandboxCacheDir); tc.name == "default" {
				// This package's TestMain points every pipeline at one shared compiled-module
				// cache (AWAKEN_SANDBOX_CACHE_DIR, which overrides cache_dir); without it,
				// dev must fall back to its data directory. That directory starts with a
				// copy of the shared cache's compiled code: compiling the example modules
				// under the race detector takes a minute and more on two busy cores.
				t.Setenv(config.EnvSandboxCacheDir, "")
				if shared != "" {
					if err := os.CopyFS(wantCache, os.DirFS(shared)); err != nil {
						t.Fatal(err)
					}
				}
			} else if shared != "" {
				wantCache = shared
			}
			args := append([]string{"--config", "../../../examples/awaken.yaml", "--data", data,
				"--listen", natstest.FreeLoopbackAddr(t), "--http", ""}, tc.args...)
			ctx, cancel := context.WithCancel(context.Background())
			out, logs := &natstest.SyncBuffer{}, &natstest.SyncBuffer{}
			done := make(chan error, 1)
			go func() { done <- runDev(ctx, args, out, logs) }()
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(out.String(), "awaken dev ready") {
				select {
				case err := <-done:
					cancel()
					t.Fatalf("dev stopped: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					cancel()
					t.Fatal("dev not ready within 60s")
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dev: %v", err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("ready line %q does not say %q", out.String(), tc.want)
			}
			// The example configuration sets no cache_dir: dev keeps the compiled
			// WebAssembly under its data directory (unless the environment overrides it).
			if fi, err := os.Stat(wantCache); err != nil || !fi.IsDir() {
				t.Errorf("no compiled-module cache at %s: %v", wantCache, err)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			readyCache := ""
			for _, l := range lines {
				if isJSON := json.Valid([]byte(l)); isJSON == tc.console {
					t.Fatalf("log line %q: JSON %v, want %v", l, isJSON, !tc.console)
				}
				var ready struct {
					Message   string `json:"message"`
					WasmCache string `json:"wasm_cache"`
				}
				if !tc.console && json.Unmarshal([]byte(l), &ready) == nil && ready.Message == "ready" {
					readyCache = ready.WasmCache
				}
			}
			if !tc.console && readyCache != wantCache {
				t.Errorf("dev's ready line names the compiled-module cache %q, want %q", readyCache, wantCache)
			}
			if tc.console && !strings.Contains(logs.String(), " INF ready ") {
				t.Errorf("the console log has no ready line at INF:\n%s", logs.String())
			}
		})
	}
	for _, bad := range [][]string{{"--sync", "sometimes"}, {"--log-format", "xml"}, {"--log-level", "loud"}} {
		err := runDev(context.Background(), append(bad, "--config", "../../../examples/awaken.yaml"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), bad[1]) {
			t.Fatalf("%v: err %v", bad, err)
		}
	}
}

// TestDevAddrInUseNamesTheMakeVariable: an address awaken dev cannot listen on is refused
// naming both ways to pick another — the flag, and the variable of `make run`, which is
// how most people start it.
func TestDevAddrInUseNamesTheMakeVariable(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	free := natstest.FreeLoopbackAddr(t)
	for _, tc := range []struct{ listen, http, flag, makeVar string }{
		{held.Addr().String(), "", "--listen", "make run LISTEN="},
		{free, held.Addr().String(), "--http", "make run HTTP="},
	} {
		err := runDev(context.Background(), []string{"--config", "../../../examples/awaken.yaml", "--data", t.TempDir(), "--listen", tc.listen, "--http", tc.http},
			io.Discard, io.Discard)
		if !errors.Is(err, devstack.ErrAddrInUse) || !strings.Contains(err.Error(), "pick another with "+tc.flag) || !strings.Contains(err.Error(), tc.makeVar) {
			t.Errorf("%s in use: %v; want it to name %s and %s", tc.flag, err, tc.flag, tc.makeVar)
		}
	}
}
