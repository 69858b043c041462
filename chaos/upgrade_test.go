package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/testnet"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// previousVersion is the commit of main whose services the rolling upgrade starts from
// and rolls back to: the version before records and messages said their format version
// (it includes the data-lifecycle record changes). Move it forward to the last release
// when a release is cut, and capture its goldens again (AWAKEN_UPGRADE_GOLDEN, below).
const previousVersion = "856fa62"

// upgradeConfigText is chaosConfig with a scheduled tool, later, whose delay outlasts a
// service's replacement, so timers one version's gate set fire under the other's (the
// chaos tools slow, fail and lookup are never_replay: the default recovery policy), and
// a tool, halted, that the test pauses with the new api: the pause record is a format
// whose new version the previous gate refuses, so a pause written in it too early lets
// the previous gate run a paused tool's calls.
var upgradeConfigText = strings.NewReplacer(
	"  - { id: ask_me,", "  - { id: later, builtin: ran }\n  - { id: halted, builtin: ran }\n  - { id: ask_me,",
	"    - { pattern: ask_me, behavior: ask, timeout: 24h }\n",
	"    - { pattern: ask_me, behavior: ask, timeout: 24h }\n    - { pattern: later, behavior: schedule, delay: 12s }\n",
).Replace(chaosConfig)

// upgradeServices are the services the rolling upgrade replaces, in the order of the
// compatibility policy (docs/operations.md): readers of work before its writers, so no
// service of the new version waits for one of the old; the rollback goes in reverse.
var upgradeServices = []string{"publisher", "brain-exec", "gate", "batcher", "api"}

// instancesPerService is how many processes run each service: with two, each service
// runs old and new instances side by side on one durable during the rollout.
const instancesPerService = 2

// TestRollingUpgrade starts every service at previousVersion on one JetStream server,
// then, under a steady load of batches (parked approvals, scheduled calls, parallel
// delegation, never_replay tools), replaces each service instance by the new version one
// at a time (SIGTERM, start the new one), pauses a tool through the new api and approves
// the tickets parked under the old version once every service is new, then rolls every
// instance back the same way. The history checker must find no duplicate, no loss and no
// violation; a call of the paused tool must not run under either version (a pause the
// new version wrote in a format the previous one does not read would let it run).
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("upgrade: slow")
	}
	rollingUpgrade(t, 1)
}

// TestRollingUpgrade_cluster is TestRollingUpgrade on a 3-node JetStream cluster (three
// nats-server processes routed on the loopback, every stream and bucket at 3 replicas,
// each service connected with the three URLs): `make upgrade-cluster`
// (AWAKEN_UPGRADE=cluster), kept out of `make test` for its time.
func TestRollingUpgrade_cluster(t *testing.T) {
	if os.Getenv("AWAKEN_UPGRADE") != "cluster" {
		t.Skip("upgrade: the 3-node cluster variant runs in `make upgrade-cluster` (AWAKEN_UPGRADE=cluster)")
	}
	rollingUpgrade(t, 3)
}

// rollingUpgrade is the rolling upgrade and rollback on nodes JetStream servers (1 or 3).
func rollingUpgrade(t *testing.T, nodes int) {
	root := repoRoot()
	if err := exec.Command("git", "-C", root, "cat-file", "-e", previousVersion+"^{commit}").Run(); err != nil {
		t.Skipf("upgrade: the git history holding %s is not available here (%v): the rolling-upgrade test needs a full clone", previousVersion, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()

	u := newUpgradeFleet(t, ctx, nodes)
	t.Logf("built %s and HEAD in %s", previousVersion, time.Since(start).Round(time.Millisecond))

	s := seed(t)
	rng := rand.New(rand.NewPCG(s, s^0x0ade))
	w := newWorkload(rng, 0, 160, 6)
	addScheduled(w)
	for _, b := range w.batches {
		u.batchIDs = append(u.batchIDs, b.Submission.RunID)
	}
	t.Logf("workload: %d batches, %d calls", len(w.batches), w.calls)

	rec := u.rec
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	for _, name := range upgradeServices {
		for i := range instancesPerService {
			if err := u.startService(ctx, name, i, false); err != nil {
				u.dumpLogs(t)
				t.Fatal(err)
			}
		}
	}
	// The load runs through the whole upgrade and rollback: a third of the batches
	// before the rollout starts, the rest while it goes on.
	submitted := make(chan error, 1)
	go func() { submitted <- u.submitAll(runCtx, w, rec, evenly(len(w.batches), 70*time.Second)) }()

	// Under the old version only: wait until tickets of both kinds are parked.
	var parkedOld []contracts.ResumeTicket
	if err := waitUntil(ctx, "no ticket parked under the old version", time.Minute, 250*time.Millisecond, func() string {
		tickets, err := u.client.Tickets(ctx)
		if err != nil {
			return err.Error()
		}
		kinds := map[contracts.TicketReason]int{}
		for _, tk := range tickets {
			kinds[tk.Reason]++
		}
		if len(w.batches) > 0 && (kinds[contracts.ReasonPermission] < 3 || kinds[contracts.ReasonScheduledAction] < 2) {
			return fmt.Sprint(kinds)
		}
		parkedOld = tickets
		return ""
	}); err != nil {
		u.dumpLogs(t)
		t.Fatal(err)
	}
	if dir := os.Getenv("AWAKEN_UPGRADE_GOLDEN"); dir != "" {
		if err := captureFormats(ctx, u.js, dir); err != nil {
			t.Fatalf("capture the previous version's formats: %v", err)
		}
		t.Logf("captured the formats of %s into %s", previousVersion, dir)
	}
	if nodes > 1 {
		// The previous version's services created the streams and buckets: each must be
		// replicated on every node.
		for name := range u.js.StreamNames(ctx).Name() {
			st, err := u.js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if r := st.CachedInfo().Config.Replicas; r != nodes {
				t.Fatalf("stream %s has %d replicas, want %d", name, r, nodes)
			}
		}
	}
	t.Logf("%d tickets parked under %s; upgrading", len(parkedOld), previousVersion)

	// The new version's setup first (it only adds), then every instance, one at a time.
	if out, err := exec.CommandContext(ctx, u.newBin, "setup", "--config", u.cfgPath, "--nats-url", u.url).CombinedOutput(); err != nil {
		t.Fatalf("awaken setup (HEAD): %v\n%s", err, out)
	}
	upgradeStart := time.Now()
	for _, name := range upgradeServices {
		for i := range instancesPerService {
			if err := u.replace(ctx, name, i, true); err != nil {
				u.dumpLogs(t)
				t.Fatal(err)
			}
		}
	}
	t.Logf("upgraded in %s; pausing %s and approving", time.Since(upgradeStart).Round(time.Millisecond), haltedTool)
	if out, err := exec.CommandContext(ctx, u.newBin, "tools", "pause", haltedTool, "--reason", "upgrade test", "--as", "upgrade-test", "--nats-url", u.url).CombinedOutput(); err != nil {
		u.dumpLogs(t)
		t.Fatalf("awaken tools pause (HEAD): %v\n%s", err, out)
	}
	halted := haltedWorkload(4)
	if err := u.submitAll(ctx, &workload{batches: halted.batches[:2]}, rec, func(context.Context, int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	approverDone := make(chan struct{})
	go func() { defer close(approverDone); u.approve(runCtx, w) }()

	// Every ticket parked under the old version is resolved under the new one before the
	// rollback begins.
	if err := waitUntil(ctx, "tickets parked under the old version still open", 90*time.Second, 250*time.Millisecond, func() string {
		var open []string
		for _, tk := range parkedOld {
			if _, err := u.client.Ticket(ctx, tk.CorrelationID); !errors.Is(err, client.ErrNoTicket) {
				open = append(open, tk.CorrelationID)
			}
		}
		if len(open) == 0 {
			return ""
		}
		return fmt.Sprintf("%d of %d (%v)", len(open), len(parkedOld), open[:min(5, len(open))])
	}); err != nil {
		stopRun()
		<-approverDone
		u.dumpLogs(t)
		t.Fatal(err)
	}

	rollbackStart := time.Now()
	for _, name := range slices.Backward(upgradeServices) {
		for i := range instancesPerService {
			if err := u.replace(ctx, name, i, false); err != nil {
				stopRun()
				<-approverDone
				u.dumpLogs(t)
				t.Fatal(err)
			}
		}
	}
	t.Logf("rolled back in %s", time.Since(rollbackStart).Round(time.Millisecond))
	// The previous version's gates decide these under the pause the new api wrote.
	if err := u.submitAll(ctx, &workload{batches: halted.batches[2:]}, rec, func(context.Context, int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := <-submitted; err != nil {
		t.Fatalf("submit: %v", err)
	}
	if err := u.waitQuiescent(ctx, &workload{batches: append(slices.Clone(w.batches), halted.batches...)}); err != nil {
		stopRun()
		<-approverDone
		u.dumpLogs(t)
		t.Fatal(err)
	}
	stopRun()
	<-approverDone

	rep, _, err := u.driver.check(ctx, rec.history())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	fmt.Printf("upgrade %s → HEAD → %s on %d node(s): %s (seed %d, %d tickets parked across the upgrade, %s)\n",
		previousVersion, previousVersion, nodes, rep.Summary(), s, len(parkedOld), time.Since(start).Round(time.Second))
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	if rep.Duplicates != 0 || rep.Lost != 0 {
		t.Errorf("duplicates %d, lost %d: want none", rep.Duplicates, rep.Lost)
	}
	if rep.Batches < len(w.batches)+len(halted.batches) {
		t.Errorf("checked %d batches, want %d", rep.Batches, len(w.batches)+len(halted.batches))
	}
	if dl := u.deadLetters(ctx); dl != 0 {
		t.Errorf("%d dead letters: the workload is valid, so each is work given up", dl)
	}
	if t.Failed() {
		u.dumpLogs(t)
	}
}

// addScheduled adds a scheduled call (tool later) to every third sequential batch.
func addScheduled(w *workload) {
	for i := range w.batches {
		sub := &w.batches[i].Submission
		if i%3 != 0 || slices.Contains([]string{"delegate", "lookup", "ask_me", "forbidden"}, sub.Calls[0].ToolID) {
			continue
		}
		sub.Agent.Tools = append(slices.Clone(sub.Agent.Tools), "later")
		sub.Calls = append(sub.Calls, contracts.ToolCall{CallID: fmt.Sprintf("c%d", len(sub.Calls)), ToolID: "later", Arguments: json.RawMessage(`{}`)})
		w.calls++
	}
}

// haltedTool is the tool the test pauses once every service is new.
const haltedTool = "halted"

// haltedWorkload is n batches of one call of the paused tool each: the gate of either
// version must block it (its body never runs).
func haltedWorkload(n int) *workload {
	w := &workload{}
	for i := range n {
		run := fmt.Sprintf("halted-%d", i)
		sub := contracts.BatchSubmission{RunID: run, ThreadID: "thread-" + run, Step: 1,
			Agent: contracts.AgentSnapshot{SnapshotID: "snap-chaos", Tools: []string{haltedTool}},
			Calls: []contracts.ToolCall{{CallID: "c0", ToolID: haltedTool, Arguments: json.RawMessage(`{}`)}}}
		w.batches = append(w.batches, checker.Batch{Submission: sub, Expect: map[string]checker.Expectation{"c0": checker.ExpectDenied}})
		w.calls++
	}
	return w
}

// upgradeFleet runs a nats-server process and instancesPerService processes of each
// service, each of the old or the new binary.
type upgradeFleet struct {
	*cluster
	oldBin, newBin string
	starts         int
	// batchIDs are the runs of the workload (one batch each).
	batchIDs []string
	// isNew says, by instance, whether it runs the new version.
	isNew map[string]bool
	rec   *recorder
}

func newUpgradeFleet(t *testing.T, ctx context.Context, nodes int) *upgradeFleet {
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, procs: map[string]*proc{}}
	c.awakenBin, c.natsBin = build(t, ctx, dir)
	u := &upgradeFleet{cluster: c, newBin: c.awakenBin, oldBin: buildPrevious(t, ctx, filepath.Join(dir, "previous")), isNew: map[string]bool{}, rec: newRecorder()}
	c.cfgPath = filepath.Join(dir, "awaken.yaml")
	cfgText := upgradeConfigText
	if nodes > 1 {
		cfgText += fmt.Sprintf("storage: { replicas: %d }\n", nodes)
	}
	if err := os.WriteFile(c.cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.supervise = func() {}
	t.Cleanup(c.shutdown)
	if nodes == 1 {
		c.port = testnet.FreePort(t)
		c.url = "nats://127.0.0.1:" + strconv.Itoa(c.port)
		if err := c.startServer(ctx); err != nil {
			t.Fatal(err)
		}
	} else if err := u.startServers(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.url, nats.Name("upgrade-client"), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if c.driver, err = newDriver(nc, nc, cfgText); err != nil {
		t.Fatal(err)
	}
	c.driver.follow(t)
	return u
}

// startServers starts nodes nats-server processes routed into one JetStream cluster on
// the loopback and waits until each accepts connections; the fleet's URL names them all.
func (u *upgradeFleet) startServers(ctx context.Context, nodes int) error {
	ports, routes := make([]int, nodes), make([]string, nodes)
	for i := range nodes {
		ports[i] = testnet.FreePort(u.t)
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(testnet.FreePort(u.t))
	}
	var urls []string
	for i := range nodes {
		name := fmt.Sprintf("nats-%d", i+1)
		if _, err := u.start(name, u.natsBin, "-js", "-sd", filepath.Join(u.dir, "store-"+name),
			"-a", "127.0.0.1", "-p", strconv.Itoa(ports[i]), "-n", name,
			"--cluster_name", "upgrade", "--cluster", routes[i], "--routes", strings.Join(routes, ",")); err != nil {
			return err
		}
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	u.port, u.url = ports[0], strings.Join(urls, ",")
	for _, port := range ports {
		if err := waitUntil(ctx, "nats-server not listening", 30*time.Second, 20*time.Millisecond, func() string {
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
			if err != nil {
				return err.Error()
			}
			conn.Close()
			return ""
		}); err != nil {
			return err
		}
	}
	// The cluster takes JetStream requests once it has elected its meta leader.
	nc, err := nats.Connect(u.url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return waitUntil(ctx, "no JetStream meta leader", time.Minute, 200*time.Millisecond, func() string {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := js.AccountInfo(actx); err != nil {
			return err.Error()
		}
		return ""
	})
}

// buildPrevious extracts previousVersion from the repository's history (git archive: the
// checkout is left alone) into dir and builds its awaken binary there, with the shared
// Go build cache (-trimpath, so only what changed since compiles).
func buildPrevious(t *testing.T, ctx context.Context, dir string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.CommandContext(ctx, "git", "-C", repoRoot(), "archive", "--format=tar", previousVersion)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	var err error
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	var archiveErr, untarErr bytes.Buffer
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", previousVersion, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar %s: %v\n%s", previousVersion, err, untarErr.String())
	}
	bin := filepath.Join(dir, "awaken-"+previousVersion)
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-o", bin, "./cmd/awaken")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", previousVersion, err, out)
	}
	return bin
}

func instanceName(service string, i int) string { return fmt.Sprintf("%s-%c", service, 'a'+i) }

// startService starts instance i of service, of the new or the old binary, and waits
// until it says it is ready.
func (u *upgradeFleet) startService(ctx context.Context, service string, i int, newVersion bool) error {
	bin, version := u.oldBin, previousVersion
	if newVersion {
		bin, version = u.newBin, "HEAD"
	}
	u.starts++
	logName := fmt.Sprintf("%s.%d.%s", instanceName(service, i), u.starts, version)
	args := []string{service, "--config", u.cfgPath, "--nats-url", u.url}
	if service == contracts.ServiceAPI {
		args = append(args, "--http", "") // the micro service only: two instances share no port
	}
	p, err := u.startLogged(logName, bin, args...)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.procs[instanceName(service, i)] = p
	u.isNew[instanceName(service, i)] = newVersion
	u.mu.Unlock()
	logPath := filepath.Join(u.dir, "logs", logName+".log")
	return waitUntil(ctx, instanceName(service, i)+" ("+version+") not ready", 30*time.Second, 50*time.Millisecond, func() string {
		select {
		case <-p.done:
			return "exited"
		default:
		}
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte(`"ready"`)) {
			return ""
		}
		return "starting"
	})
}

// startLogged is cluster.start at the info level, whose "ready" line says a service is up.
func (u *upgradeFleet) startLogged(name, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(u.dir, "logs", name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "AWAKEN_LOG_LEVEL=info")
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), logPath: logf.Name()}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// replace stops instance i of service gracefully (SIGTERM: it finishes what it holds)
// and starts it again at the other version.
func (u *upgradeFleet) replace(ctx context.Context, service string, i int, newVersion bool) error {
	name := instanceName(service, i)
	u.mu.Lock()
	p := u.procs[name]
	wasNew := u.isNew[name]
	u.mu.Unlock()
	if p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(45 * time.Second):
			return fmt.Errorf("%s did not stop within 45 s of SIGTERM", name)
		case <-ctx.Done():
			return ctx.Err()
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			b, _ := os.ReadFile(p.logPath)
			// The previous version's brain-exec could read its one SIGTERM as a second
			// and stop at once (fixed since, TestBrainExecOneSignalDrains): what it held
			// is then left to crash recovery, so the checker is told of a crash.
			if !wasNew && service == contracts.ServiceBrainExec && bytes.Contains(b, []byte("stopped at once by a second signal")) {
				u.t.Logf("%s (%s) stopped at once on one SIGTERM: recorded as a crash", name, previousVersion)
				u.rec.killed(name, time.Now())
			} else {
				return fmt.Errorf("%s exited with %d on SIGTERM:\n%s", name, code, b)
			}
		}
	}
	before := u.published(ctx)
	if err := u.startService(ctx, service, i, newVersion); err != nil {
		return err
	}
	// The two versions share the load for a few batches before the next replacement, so
	// each mixed state of the rollout publishes some.
	return waitUntil(ctx, "no batch published after replacing "+name, time.Minute, 100*time.Millisecond, func() string {
		if n := u.published(ctx); n < before+publishedPerStep && n < len(u.batchIDs) {
			return fmt.Sprintf("%d published, waiting for %d", n, before+publishedPerStep)
		}
		return ""
	})
}

// publishedPerStep is how many batches publish between two replacements.
const publishedPerStep = 3

// published counts the workload's batches whose results are out.
func (u *upgradeFleet) published(ctx context.Context) int {
	info, err := u.resultsInfo(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, run := range u.batchIDs {
		if info[u.names.ResultsSubject(run)] > 0 {
			n++
		}
	}
	return n
}

// deadLetters counts the messages of the dead-letter stream.
func (u *upgradeFleet) deadLetters(ctx context.Context) uint64 {
	s, err := u.js.Stream(ctx, u.names.DeadLetterStream())
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

func (u *upgradeFleet) dumpLogs(t *testing.T) {
	entries, _ := os.ReadDir(filepath.Join(u.dir, "logs"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(u.dir, "logs", e.Name()))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("== %s (last lines of %d)", e.Name(), len(lines))
		for _, l := range lines[max(0, len(lines)-15):] {
			if strings.Contains(l, `"level":"info"`) {
				continue
			}
			t.Log(l)
		}
	}
}

// goldenSample is one stored message of the previous version: a record revision (on a
// KV_ stream) or a message, as the golden test of pkg/contracts decodes it.
type goldenSample struct {
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header,omitempty"`
	Data    json.RawMessage     `json:"data"`
}

// captureFormats writes, for every stream, one sample of each kind of message it holds
// (by CloudEvent type and the set of the body's top-level fields) to dir/{stream}.json.
func captureFormats(ctx context.Context, js jetstream.JetStream, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := js.StreamNames(ctx)
	var streams []string
	for n := range names.Name() {
		streams = append(streams, n)
	}
	if err := names.Err(); err != nil {
		return err
	}
	for _, stream := range streams {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs == 0 {
			continue
		}
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		var samples []goldenSample
		for range info.State.Msgs {
			m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
					break
				}
				return fmt.Errorf("%s: %w", stream, err)
			}
			h := m.Headers()
			if h.Get("KV-Operation") != "" || len(m.Data()) == 0 {
				continue
			}
			typ, _, _ := cloudevent.HeaderAttribute(h, cloudevent.HeaderType)
			var top map[string]json.RawMessage
			_ = json.Unmarshal(m.Data(), &top)
			keys := make([]string, 0, len(top))
			for k := range top {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			kind := typ + "|" + strings.Join(keys, ",")
			if seen[kind] || len(samples) >= 60 {
				continue
			}
			seen[kind] = true
			keep := map[string][]string{}
			for k, v := range h {
				if strings.HasPrefix(strings.ToLower(k), "ce-") || k == "Content-Type" {
					keep[k] = v
				}
			}
			samples = append(samples, goldenSample{Subject: m.Subject(), Header: keep, Data: json.RawMessage(append([]byte(nil), m.Data()...))})
		}
		if len(samples) == 0 {
			continue
		}
		b, err := json.MarshalIndent(samples, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, stream+".json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
