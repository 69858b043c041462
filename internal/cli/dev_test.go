package cli

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
)

// TestDevSyncLevel: `awaken dev` states its durability level when it is ready (always by
// default, lazy on request) and refuses a level it does not know.
func TestDevSyncLevel(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"default", nil, "sync always"},
		{"lazy", []string{"--sync", "lazy"}, "sync lazy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			args := append([]string{"--config", "../../examples/awaken.yaml", "--data", t.TempDir(),
				"--listen", "127.0.0.1:" + strconv.Itoa(port), "--http", ""}, tc.args...)
			ctx, cancel := context.WithCancel(context.Background())
			out := &natstest.SyncBuffer{}
			done := make(chan error, 1)
			go func() { done <- runDev(ctx, args, out, io.Discard) }()
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
		})
	}
	err := runDev(context.Background(), []string{"--sync", "sometimes", "--config", "../../examples/awaken.yaml"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("--sync sometimes: err %v", err)
	}
}
