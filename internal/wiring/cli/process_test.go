package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/devstack"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// startDevProcess runs `awaken dev` as a child process (this test binary, see commandEnv)
// and waits until it is ready.
func startDevProcess(t *testing.T, cfgPath, data, listen string) (*exec.Cmd, *natstest.SyncBuffer, chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "dev", "--config", cfgPath, "--data", data, "--listen", listen, "--http", "", "--log-format", "json")
	cmd.Env = append(os.Environ(), commandEnv+"=1")
	stdout, stderr := &natstest.SyncBuffer{}, &natstest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("awaken dev's log:\n%s", stderr.String())
		}
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	natstest.WaitFor(t, 90*time.Second, func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("awaken dev exited before it was ready: %v\n%s", err, stderr.String())
		default:
		}
		return strings.Contains(stdout.String(), "awaken dev ready")
	}, "the child awaken dev to be ready")
	return cmd, stderr, exited
}

// TestDevProcess drives `awaken dev` as a process: a second one on the same data
// directory fails at once naming the first one's pid; a port in use fails at once naming
// the address; the first SIGINT logs which calls the stop waits for and until when, and
// a second one stops at once, saying the crash semantics apply.
func TestDevProcess(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "awaken.yaml")
	if err := os.WriteFile(cfgPath, []byte("policy: {default_behavior: allow}\ntools:\n  - id: slow\n  - id: echo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	listen := natstest.FreeLoopbackAddr(t)
	cmd, stderr, exited := startDevProcess(t, cfgPath, data, listen)

	// The lock: the same data directory, other ports.
	other := natstest.FreeLoopbackAddr(t)
	start := time.Now()
	err := runDev(context.Background(), []string{"--config", cfgPath, "--data", data, "--listen", other, "--http", ""}, &natstest.SyncBuffer{}, &natstest.SyncBuffer{})
	var inUse *devstack.DataDirInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, devstack.ErrDataDirInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)+" ") {
		t.Fatalf("a second dev on the data directory: %v (want the lock, naming pid %d)", err, cmd.Process.Pid)
	}
	t.Logf("second dev refused after %s: %v", time.Since(start), err)

	// The ports: the NATS address the child holds, then an HTTP address held here.
	err = runDev(context.Background(), []string{"--config", cfgPath, "--data", t.TempDir(), "--listen", listen, "--http", ""}, &natstest.SyncBuffer{}, &natstest.SyncBuffer{})
	var addr *devstack.AddrInUseError
	if !errors.As(err, &addr) || !errors.Is(err, devstack.ErrAddrInUse) || !strings.Contains(err.Error(), "--listen "+listen+": address already in use") {
		t.Fatalf("--listen in use: %v", err)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	err = runDev(context.Background(), []string{"--config", cfgPath, "--data", t.TempDir(), "--listen", other, "--http", held.Addr().String()}, &natstest.SyncBuffer{}, &natstest.SyncBuffer{})
	if !errors.As(err, &addr) || !strings.Contains(err.Error(), "--http "+held.Addr().String()+": address already in use") {
		t.Fatalf("--http in use: %v", err)
	}

	// A call that runs for minutes, then the two signals.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const run = "run-stop"
	if _, err := c.Submit(ctx, servicetest.Submission(run, 1, servicetest.CallJSON("c1", "slow", map[string]int{"ms": 600000}))); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 60*time.Second, func() bool {
		kv, err := js.KeyValue(ctx, contracts.NewNames(c.Prefix()).CallsBucket())
		if err != nil {
			return false
		}
		e, err := kv.Get(ctx, contracts.CallKey(contracts.TargetBrain, run, 1, "c1"))
		if err != nil {
			return false
		}
		var rec contracts.CallRecord
		return json.Unmarshal(e.Value(), &rec) == nil && rec.Phase.Kind == contracts.PhaseExecuting && rec.Entered
	}, "the slow call to be running")
	c.Close()

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		return strings.Contains(stderr.String(), "stopping: waiting until ") &&
			strings.Contains(stderr.String(), "brain-exec c1 of tool-batch:run-stop:1")
	}, "the stop to say what it waits for")
	select {
	case err := <-exited:
		t.Fatalf("dev exited on the first signal with the call running: %v\n%s", err, stderr.String())
	default:
	}
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("dev stopped at once with %v, want exit status 1", err)
		}
		t.Logf("exited %s after the second signal", time.Since(signalled))
	case <-time.After(20 * time.Second): // below the 30 s the drain would wait
		t.Fatalf("dev did not stop at once on the second signal:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "second signal: stopping at once") || !strings.Contains(stderr.String(), "never-replay call that had started ends indeterminate") {
		t.Errorf("the log does not say the stop was cut short and what follows:\n%s", stderr.String())
	}
}
