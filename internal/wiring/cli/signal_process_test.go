package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
)

// TestBrainExecOneSignalDrains: `awaken brain-exec` stopped by one SIGTERM drains and
// exits 0, every time. It once watched the signal twice (the command's watcher and the
// executor's own), and when the command's watcher ended the drain first the executor
// read the same SIGTERM as a second signal and stopped at once, leaving its calls to
// crash recovery (about one stop in three; the rolling-upgrade test met it).
func TestBrainExecOneSignalDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := natstest.Start(t)
	cfg := filepath.Join(t.TempDir(), "awaken.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  - { id: echo, target: brain }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		cmd := exec.Command(os.Args[0], "brain-exec", "--config", cfg, "--nats-url", srv.URL())
		cmd.Env = append(os.Environ(), commandEnv+"=1", "AWAKEN_LOG_LEVEL=info")
		stderr := &natstest.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		natstest.WaitFor(t, 30*time.Second, func() bool {
			return strings.Contains(stderr.String(), `"ready"`)
		}, "brain-exec to be ready")
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil || strings.Contains(stderr.String(), "second signal") {
				t.Fatalf("stop %d: one SIGTERM: exit %v\n%s", i, err, stderr.String())
			}
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("stop %d: brain-exec did not stop within 40 s of SIGTERM\n%s", i, stderr.String())
		}
	}
}
