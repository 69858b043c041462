package chaos_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/checker"

	"github.com/awaken-dev/awaken/internal/testnet"
)

// services are the processes the monkey kills: every stage of the pipeline (the chaos
// workload has no sandbox tool, so sandbox-exec is not run).
var services = []string{"publisher", "brain-exec", "gate", "batcher"}

const natsServer = "nats-server"

// processConfig is the process run's configuration: the records of finished runs expire
// five seconds after the run finished (the run record ten), during the run; a submission
// outlives every outage of the batcher and the server the monkey causes.
var processConfig = withPartitions(withRetention("5s", "30s"), 2)

// proc is one started OS process; done closes when it has exited.
type proc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	killed bool // SIGKILLed by the monkey (guarded by cluster.mu)
	// logPath is the file its output goes to (set by the upgrade test).
	logPath string
}

// cluster runs a nats-server process and one process per service, restarting killed
// services after a random pause (a supervisor, as systemd or Kubernetes would).
type cluster struct {
	t                  *testing.T
	dir, cfgPath       string
	awakenBin, natsBin string
	url                string
	port               int
	*driver
	supervise                 context.CancelFunc
	supervisors               sync.WaitGroup
	mu                        sync.Mutex
	procs                     map[string]*proc
	unexpectedExits, restarts int
}

// repoRoot is the module root: a test runs in its package's directory (not
// runtime.Caller, whose file name is module-relative under -trimpath).
func repoRoot() string {
	dir, err := filepath.Abs("..")
	if err != nil {
		panic(err)
	}
	return dir
}

// build compiles the awaken binary and nats-server (from the module's own dependency) into
// dir; both are cached by the Go build cache, so only the first run pays for it.
func build(t *testing.T, ctx context.Context, dir string) (awaken, natsBin string) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	awaken, natsBin = filepath.Join(dir, "awaken"), filepath.Join(dir, "nats-server")
	for _, args := range [][]string{
		{"build", "-o", awaken, "./cmd/awaken"},
		{"build", "-o", natsBin, "github.com/nats-io/nats-server/v2"},
	} {
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	return awaken, natsBin
}

func newCluster(t *testing.T, ctx context.Context, seed uint64) *cluster {
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, procs: map[string]*proc{}}
	c.awakenBin, c.natsBin = build(t, ctx, dir)
	c.cfgPath = filepath.Join(dir, "awaken.yaml")
	if err := os.WriteFile(c.cfgPath, []byte(processConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	c.port = testnet.FreePort(t)
	c.url = "nats://127.0.0.1:" + strconv.Itoa(c.port)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	superCtx, cancel := context.WithCancel(context.Background())
	c.supervise = cancel
	t.Cleanup(c.shutdown)
	if err := c.startServer(ctx); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.url, nats.Name("chaos-client"), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if c.driver, err = newDriver(nc, nc, processConfig); err != nil {
		t.Fatal(err)
	}
	c.follow(t)
	for i, name := range services {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		c.supervisors.Go(func() { c.superviseService(superCtx, name, rng) })
	}
	return c
}

// start launches a process with its output appended to logs/{name}.log.
func (c *cluster) start(name string, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(c.dir, "logs", name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "AWAKEN_LOG_LEVEL=warn")
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return p, nil
}

// startServer starts nats-server on the cluster's port and store directory and waits
// until it accepts connections.
func (c *cluster) startServer(ctx context.Context) error {
	if _, err := c.start(natsServer, c.natsBin, "-js", "-sd", filepath.Join(c.dir, "store"),
		"-a", "127.0.0.1", "-p", strconv.Itoa(c.port), "-n", "chaos"); err != nil {
		return err
	}
	return waitUntil(ctx, "nats-server not listening", 30*time.Second, 20*time.Millisecond, func() string {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.port), time.Second)
		if err != nil {
			return err.Error()
		}
		conn.Close()
		return ""
	})
}

// superviseService keeps one service running: whenever its process exits (killed by the
// monkey, or on its own — a start while the server is down fails), it is restarted after
// a random pause of 100–700 ms.
func (c *cluster) superviseService(ctx context.Context, name string, rng *rand.Rand) {
	for ctx.Err() == nil {
		p, err := c.start(name, c.awakenBin, name, "--config", c.cfgPath, "--nats-url", c.url)
		if err != nil {
			c.t.Errorf("supervisor: %v", err)
			return
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return
		}
		c.mu.Lock()
		if !p.killed {
			c.unexpectedExits++
		}
		c.restarts++
		c.mu.Unlock()
		select {
		case <-time.After(time.Duration(100+rng.IntN(600)) * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// kill SIGKILLs a process (if it runs) and records the kill.
func (c *cluster) kill(name string, rec *recorder) *proc {
	c.mu.Lock()
	p := c.procs[name]
	if p == nil {
		c.mu.Unlock()
		return nil
	}
	select {
	case <-p.done:
		c.mu.Unlock()
		return nil // already down (a restart is pending)
	default:
	}
	p.killed = true
	c.mu.Unlock()
	rec.killed(name, time.Now())
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	return p
}

// monkey SIGKILLs a random target every killEvery for chaosFor. With serverKills, one
// kill in four is the nats-server, restarted after 0.2–1.5 s on the same store and port.
func (c *cluster) monkey(ctx context.Context, rng *rand.Rand, p profile, rec *recorder) {
	end := time.Now().Add(p.chaosFor)
	for {
		wait := p.killEvery[0] + time.Duration(rng.Int64N(int64(p.killEvery[1]-p.killEvery[0])))
		if time.Now().Add(wait).After(end) {
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		if p.serverKills && rng.IntN(4) == 0 {
			if pr := c.kill(natsServer, rec); pr != nil {
				<-pr.done
				select {
				case <-time.After(time.Duration(200+rng.IntN(1300)) * time.Millisecond):
				case <-ctx.Done():
					return
				}
				if err := c.startServer(ctx); err != nil {
					c.t.Errorf("restart nats-server: %v", err)
					return
				}
			}
			continue
		}
		c.kill(services[rng.IntN(len(services))], rec)
	}
}

// allRunning waits until the server and every service process run.
func (c *cluster) allRunning(ctx context.Context) error {
	return waitUntil(ctx, "still down", 30*time.Second, 50*time.Millisecond, func() string {
		c.mu.Lock()
		defer c.mu.Unlock()
		down := []string{}
		for _, name := range append([]string{natsServer}, services...) {
			p := c.procs[name]
			if p == nil {
				down = append(down, name)
				continue
			}
			select {
			case <-p.done:
				down = append(down, name)
			default:
			}
		}
		if len(down) == 0 {
			return ""
		}
		return fmt.Sprint(down)
	})
}

// check reads the streams and the ledger and runs the checker.
func (c *cluster) check(ctx context.Context, h checker.History) (checker.Report, error) {
	c.mu.Lock()
	c.t.Logf("process restarts %d (unexpected exits %d)", c.restarts, c.unexpectedExits)
	c.mu.Unlock()
	rep, _, err := c.driver.check(ctx, h)
	return rep, err
}

// dumpLogs prints the tail of every process's log.
func (c *cluster) dumpLogs(t *testing.T) {
	for _, name := range append([]string{natsServer}, services...) {
		f, err := os.Open(filepath.Join(c.dir, "logs", name+".log"))
		if err != nil {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		t.Logf("== %s (last lines of %d)", name, len(lines))
		for _, l := range lines[max(0, len(lines)-20):] {
			t.Log(l)
		}
	}
}

// shutdown stops the supervisors and SIGKILLs every process the cluster started.
func (c *cluster) shutdown() {
	c.supervise()
	c.supervisors.Wait()
	c.mu.Lock()
	procs := make([]*proc, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		default:
		}
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			c.t.Logf("kill %d: %v", p.cmd.Process.Pid, err)
		}
		<-p.done
	}
}
