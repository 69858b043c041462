package cli

import (
	"fmt"
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
// crash recovery (about one stop in three; the rolling-upgrade test met it). Eight
// processes, started and stopped together: the race is inside each process, and a start
// is mostly waiting, so eight at once take about the time of one.
func TestBrainExecOneSignalDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := natstest.Start(t)
	cfg := filepath.Join(t.TempDir(), "awaken.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  - { id: echo, target: brain }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type process struct {
		cmd    *exec.Cmd
		stderr *natstest.SyncBuffer
		exited chan error
	}
	procs := make([]process, 8)
	for i := range procs {
		p := process{cmd: exec.Command(os.Args[0], "brain-exec", "--config", cfg, "--nats-url", srv.URL()),
			stderr: &natstest.SyncBuffer{}, exited: make(chan error, 1)}
		p.cmd.Env = append(os.Environ(), commandEnv+"=1", "AWAKEN_LOG_LEVEL=info")
		p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.cmd.Process.Kill() }) // after a failure; a no-op once it exited
		go func() { p.exited <- p.cmd.Wait() }()
		procs[i] = p
	}
	for i, p := range procs {
		natstest.WaitFor(t, 30*time.Second, func() bool {
			return strings.Contains(p.stderr.String(), `"ready"`)
		}, fmt.Sprintf("brain-exec %d to be ready", i))
	}
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(40 * time.Second)
	for i, p := range procs {
		select {
		case err := <-p.exited:
			if err != nil || strings.Contains(p.stderr.String(), "second signal") {
				t.Errorf("stop %d: one SIGTERM: exit %v\n%s", i, err, p.stderr.String())
			}
		case <-deadline:
			t.Fatalf("stop %d: brain-exec did not stop within 40 s of SIGTERM\n%s", i, p.stderr.String())
		}
	}
}
