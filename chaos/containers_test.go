package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/awakentest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The fault kinds of the cluster chaos run, one summary line each.
const (
	faultLeaderStop = "leader-stop" // the leader node of a stream or bucket stopped (SIGTERM), then restarted
	faultLeaderKill = "leader-kill" // the same, SIGKILLed
	faultPartition  = "partition"   // a node cut from the cluster network, then reconnected
	faultPause      = "pause"       // a node frozen (docker pause) longer than the ack wait
	faultWipe       = "wipe"        // a node replaced by an empty one (data directory wiped)
)

var faultKinds = []string{faultLeaderStop, faultLeaderKill, faultPartition, faultPause, faultWipe}

// clusterAckWait is chaosConfig's consumers.ack_wait: a pause outlasts it.
const clusterAckWait = time.Second

// clusterConfig is the cluster run's configuration. Its run retention is a minute: a
// stream whose leader is killed or cut off has none until the election ends, and a
// publisher that finalized a batch and then could not reach the results stream has been
// seen stalled for a minute (its request timing out) before it published. The run record,
// which alone holds a finalized batch until the publisher archives it, expires 2R after
// the finalize: with R 15 s such a batch was lost (seed 1796549261048489016, lost=2, the
// limit docs/operations.md "Data lifecycle" states). Submissions outlive the longest
// partition of the batcher's node and the elections after it.
//
// Three partitions: their streams' leaders are on different nodes or not, and a node's
// faults take some partitions' leaders while the others go on.
var clusterConfig = withPartitions(withRetention("60s", "2m"), 3)

// fault is one injected fault: from start (injected) to end (healed).
type fault struct {
	kind, node, detail string
	start, end         time.Time
}

// TestChaos_cluster is `make chaos-cluster`: a 3-node JetStream cluster in containers
// (pkg/awakentest, every stream and bucket at 3 replicas, the services spread over the
// nodes by their clients' randomised server lists), the chaos workload (at least
// AWAKEN_CHAOS_BATCHES batches, default 500) and AWAKEN_CHAOS_REPEATS (default 5) faults
// of each kind at random moments during the load; then the history checker of `make
// chaos`, and one line per fault kind with the violations among the batches it touched.
func TestChaos_cluster(t *testing.T) {
	if os.Getenv("AWAKEN_CHAOS") != "cluster" {
		t.Skip("chaos: the 3-node cluster run needs a Docker engine; it runs in `make chaos-cluster` (AWAKEN_CHAOS=cluster)")
	}
	batches, repeats := envInt("AWAKEN_CHAOS_BATCHES", 500), envInt("AWAKEN_CHAOS_REPEATS", 5)
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, s^0xc1a5))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	d, err := awakentest.Run(ctx, awakentest.Options{Cluster: true, ConfigYAML: []byte(clusterConfig)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := d.Terminate(tctx); err != nil {
			t.Logf("terminate: %v", err)
		}
	})
	cc := &containerCluster{t: t, d: d, rng: rng}
	platform := cc.connect(deploy.UserPlatform)
	admin := cc.connect(deploy.UserAdmin)
	cc.sys = cc.connect(deploy.UserSys)
	if cc.driver, err = newDriver(platform, admin, clusterConfig); err != nil {
		t.Fatal(err)
	}
	cc.follow(t)
	cc.admin = cc.driver.js
	if cc.streams, err = cc.replicatedStreams(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up after %s: %d streams and buckets at 3 replicas; leaders %v; services on %v",
		time.Since(start).Round(time.Second), len(cc.streams), cc.leaders(ctx), cc.serviceNodes(ctx))

	w := newWorkload(rng, 0, batches, 6)
	schedule := faultSchedule(rng, repeats, len(cc.streams))
	t.Logf("workload: %d batches, %d calls; %d faults", len(w.batches), w.calls, len(schedule))

	rec := newRecorder()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	approverDone := make(chan struct{})
	go func() { defer close(approverDone); cc.approve(runCtx, w) }()
	// The load follows the faults: batch i of n waits until i*(F+1)/n of the F faults have
	// begun, so every fault meets batches in flight and the last ones run after the last.
	var begun atomic.Int64
	pace := func(ctx context.Context, i int) error {
		want := int64(i * (len(schedule) + 1) / len(w.batches))
		for begun.Load() < want {
			if err := ctxsleep.Sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
		return ctxsleep.Sleep(ctx, 40*time.Millisecond)
	}
	submitted := make(chan error, 1)
	go func() { submitted <- cc.submitAll(runCtx, w, rec, pace) }()

	var faults []fault
	for i, kind := range schedule {
		if err := ctxsleep.Sleep(ctx, time.Duration(1000+rng.IntN(4000))*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		begun.Add(1)
		f, err := cc.inject(ctx, kind, i, rec)
		if err != nil {
			cc.dumpLogs(ctx)
			t.Fatalf("fault %d (%s): %v", i, kind, err)
		}
		faults = append(faults, f)
		healthy := time.Now()
		err = cc.waitHealthy(ctx, 2*time.Minute)
		if err == nil {
			err = cc.waitCaughtUp(ctx, 2*time.Minute)
		}
		if err != nil {
			cc.dumpLogs(ctx)
			t.Fatalf("after fault %d (%s %s): %v", i, kind, f.node, err)
		}
		t.Logf("fault %d/%d %s %s (%s): %s, healthy %s later", i+1, len(schedule), kind, f.node, f.detail,
			f.end.Sub(f.start).Round(time.Millisecond), time.Since(healthy).Round(time.Millisecond))
	}
	begun.Store(int64(len(schedule) + 1))
	if err := <-submitted; err != nil {
		t.Fatalf("submit: %v", err)
	}
	t.Logf("faults over after %s; waiting for quiescence", time.Since(start).Round(time.Second))
	quiet := time.Now()
	// A batch still unpublished is a lost batch for the checker, which runs all the same so
	// the fault lines attribute it.
	quiescent := cc.waitQuiescent(ctx, w)
	stopRun()
	<-approverDone
	if quiescent != nil {
		cc.dumpLogs(ctx)
		cc.diagnoseUnpublished(ctx, rec.history())
		t.Error(quiescent)
	}
	t.Logf("waited %s for quiescence", time.Since(quiet).Round(time.Millisecond))

	h := rec.history()
	rep, obs, err := cc.check(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	fmt.Printf("%s (seed %d, cluster, %s)\n", rep.Summary(), s, time.Since(start).Round(time.Second))
	fmt.Println(promiseLine(rep))
	for _, line := range faultLines(h, obs, rep, faults) {
		fmt.Println(line)
	}
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	cc.reportExpiry(t, ctx)
	// The workload is valid input, so every dead letter is work a service gave up under
	// the faults (an output dropped on a stale read left its batch unpublished before).
	cc.reportDeadLetters(t, ctx)
	// The audit trail kept one chain per subject through every fault (leader kills of the
	// audit stream, partitions of the gate's node, wiped disks): every record links to the
	// one before it on its subject, from the first, with none lost, forked or reordered.
	// Each partition has its audit stream.
	for _, names := range cc.names.EachPartition() {
		trail, err := auditchain.Read(ctx, cc.admin, names.AuditStream(), auditchain.Query{Subject: names.AuditWildcard()})
		if err != nil {
			t.Fatalf("read the audit trail: %v", err)
		}
		sum, err := auditchain.Verify(trail, auditchain.VerifyOptions{FromStart: true})
		if err != nil {
			t.Errorf("audit trail of %s: %v", names.AuditStream(), err)
			continue
		}
		fmt.Printf("audit trail: %s records=%d subjects=%d unbroken\n", names.AuditStream(), sum.Records, sum.Subjects)
	}
	if rep.Batches < batches {
		t.Errorf("checked %d batches, want at least %d", rep.Batches, batches)
	}
	if t.Failed() {
		cc.dumpLogs(ctx)
	}
}

// faultSchedule is the shuffled fault order: repeats of each kind, and at least one
// leader fault per stream and bucket (targets rotate through them).
func faultSchedule(rng *rand.Rand, repeats, streams int) []string {
	var out []string
	leaderFaults := max(2*repeats, streams)
	for i := range leaderFaults {
		out = append(out, []string{faultLeaderStop, faultLeaderKill}[i%2])
	}
	for _, k := range []string{faultPartition, faultPause, faultWipe} {
		for range repeats {
			out = append(out, k)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// containerCluster is the deployment under test and what the faults need of it.
type containerCluster struct {
	*driver
	t          *testing.T
	d          *awakentest.Deployment
	rng        *rand.Rand
	admin      jetstream.JetStream
	sys        *nats.Conn
	streams    []string
	leaderNext int // rotation over streams for the leader faults
	partitions int
}

func (c *containerCluster) connect(user string) *nats.Conn {
	nc, err := c.d.Connect(user)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// replicatedStreams lists every stream and bucket and checks each has 3 replicas.
func (c *containerCluster) replicatedStreams(ctx context.Context) ([]string, error) {
	var out []string
	lister := c.admin.ListStreams(ctx)
	for info := range lister.Info() {
		if info.Config.Replicas != 3 {
			return nil, fmt.Errorf("%s has %d replicas, want 3", info.Config.Name, info.Config.Replicas)
		}
		out = append(out, info.Config.Name)
	}
	if err := lister.Err(); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// leaderOf returns the node leading a stream's Raft group.
func (c *containerCluster) leaderOf(ctx context.Context, stream string) (string, error) {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.admin.Stream(ictx, stream)
	if err != nil {
		return "", err
	}
	info, err := st.Info(ictx)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("%s has no leader", stream)
	}
	return info.Cluster.Leader, nil
}

func (c *containerCluster) leaders(ctx context.Context) map[string]string {
	out := map[string]string{}
	for _, s := range c.streams {
		l, err := c.leaderOf(ctx, s)
		if err != nil {
			l = err.Error()
		}
		out[s] = l
	}
	return out
}

// serverReply is a node's reply to a system-account request: the node's name and what it
// answered.
type serverReply[T any] struct {
	Server struct {
		Name string `json:"name"`
	} `json:"server"`
	Data T `json:"data"`
}

// pingServers sends a system-account request to every node and returns the replies, each
// decoded (one per node that answered within two seconds).
func pingServers[T any](c *containerCluster, subject string, body []byte) ([]serverReply[T], error) {
	inbox := nats.NewInbox()
	sub, err := c.sys.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.sys.PublishRequest(subject, inbox, body); err != nil {
		return nil, err
	}
	var out []serverReply[T]
	deadline := time.Now().Add(2 * time.Second)
	for range len(c.d.Nodes()) {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		var r serverReply[T]
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return nil, fmt.Errorf("%s reply: %w", subject, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// serviceNodes asks every node which awaken connections it serves: connection name
// ("awaken-gate", …) to server name.
func (c *containerCluster) serviceNodes(context.Context) map[string]string {
	replies, err := pingServers[struct {
		Conns []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}](c, "$SYS.REQ.SERVER.PING.CONNZ", []byte(`{"acc":"AWAKEN","limit":1024}`))
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	out := map[string]string{}
	for _, r := range replies {
		for _, conn := range r.Data.Conns {
			if strings.HasPrefix(conn.Name, "awaken-") {
				out[conn.Name] = r.Server.Name
			}
		}
	}
	return out
}

// streamSeqs asks every node for the last sequence of each stream replica it holds:
// node to stream to last sequence.
func (c *containerCluster) streamSeqs() (map[string]map[string]uint64, error) {
	replies, err := pingServers[struct {
		Accounts []struct {
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					LastSeq uint64 `json:"last_seq"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}](c, "$SYS.REQ.SERVER.PING.JSZ", []byte(`{"account":"AWAKEN","accounts":true,"streams":true}`))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]uint64{}
	for _, r := range replies {
		seqs := map[string]uint64{}
		for _, a := range r.Data.Accounts {
			for _, st := range a.Streams {
				seqs[st.Name] = st.State.LastSeq
			}
		}
		out[r.Server.Name] = seqs
	}
	return out, nil
}

// waitCaughtUp waits until every node holds every stream up to at least the highest
// last sequence any node held when the wait began: a restarted or wiped node has its
// copy back (a leader's "current" follower may still be fetching a snapshot's messages),
// so the next fault cannot leave a majority of replicas without the data.
func (c *containerCluster) waitCaughtUp(ctx context.Context, within time.Duration) error {
	var target map[string]uint64
	return waitUntil(ctx, "not caught up", within, 250*time.Millisecond, func() string {
		seqs, err := c.streamSeqs()
		if err == nil && len(seqs) < len(c.d.Nodes()) {
			err = fmt.Errorf("%d of %d nodes answered", len(seqs), len(c.d.Nodes()))
		}
		if err != nil {
			return err.Error()
		}
		if target == nil {
			target = map[string]uint64{}
			for _, node := range seqs {
				for st, seq := range node {
					target[st] = max(target[st], seq)
				}
			}
		}
		behind := ""
		for node, held := range seqs {
			for _, st := range c.streams {
				if held[st] < target[st] {
					behind = fmt.Sprintf("%s holds %s up to %d, want %d", node, st, held[st], target[st])
				}
			}
		}
		return behind
	})
}

// inject runs one fault of kind to its end (the node restarted, reconnected or resumed)
// and records its start and its end in the history, and its span on the start: a batch
// in flight at any moment of it may be disturbed (a rejoining node moves leaders too).
func (c *containerCluster) inject(ctx context.Context, kind string, i int, rec *recorder) (fault, error) {
	f := fault{kind: kind}
	begin := func() {
		f.start = time.Now()
		rec.killed(kind+" "+f.node, f.start)
	}
	nodes := c.d.Nodes()
	var err error
	switch kind {
	case faultLeaderStop, faultLeaderKill:
		stream := c.streams[c.leaderNext%len(c.streams)]
		c.leaderNext++
		if f.node, err = c.leaderOf(ctx, stream); err != nil {
			return f, err
		}
		f.detail = "leader of " + stream
		begin()
		if kind == faultLeaderStop {
			err = c.d.Stop(ctx, f.node, 10*time.Second)
		} else {
			err = c.d.Kill(ctx, f.node)
		}
		if err != nil {
			return f, err
		}
		if err := ctxsleep.Sleep(ctx, time.Duration(500+c.rng.IntN(3000))*time.Millisecond); err != nil {
			return f, err
		}
		err = c.d.Start(ctx, f.node)
	case faultPartition:
		// The first two partitions cut the node the gate, then the publisher, is on.
		f.node = nodes[c.rng.IntN(len(nodes))]
		on := c.serviceNodes(ctx)
		if who := []string{"awaken-gate", "awaken-publisher"}; c.partitions < len(who) && on[who[c.partitions]] != "" {
			f.node = on[who[c.partitions]]
		}
		f.detail = "serves " + servedBy(on, f.node)
		c.partitions++
		hold := time.Duration(3000+c.rng.IntN(7000)) * time.Millisecond
		begin()
		err = c.cutOff(ctx, f.node, hold, c.d.Disconnect, c.d.Reconnect)
	case faultPause:
		f.node = nodes[c.rng.IntN(len(nodes))]
		hold := clusterAckWait + time.Duration(1000+c.rng.IntN(4000))*time.Millisecond
		f.detail = "frozen " + hold.Round(time.Millisecond).String()
		begin()
		err = c.cutOff(ctx, f.node, hold, c.d.Pause, c.d.Unpause)
	case faultWipe:
		f.node = nodes[c.rng.IntN(len(nodes))]
		f.detail = "data wiped"
		begin()
		err = c.d.Replace(ctx, f.node)
	default:
		return f, fmt.Errorf("unknown fault kind %q", kind)
	}
	f.end = time.Now()
	rec.healed(kind+" "+f.node, f.start, f.end)
	rec.killed(kind+" "+f.node+" healed", f.end)
	return f, err
}

// cutOff cuts node off with cut (a partition, a freeze) for hold, then undoes it with undo
// even when the run's context has ended, so no node stays frozen or cut off (a paused
// container cannot be removed cleanly). A failed undo is reported before an end of ctx
// during the hold.
func (c *containerCluster) cutOff(ctx context.Context, node string, hold time.Duration, cut, undo func(context.Context, string) error) error {
	if err := cut(ctx, node); err != nil {
		return err
	}
	held := ctxsleep.Sleep(ctx, hold)
	uctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := undo(uctx, node); err != nil {
		return err
	}
	return held
}

func servedBy(on map[string]string, node string) string {
	var names []string
	for conn, n := range on {
		if n == node {
			names = append(names, strings.TrimPrefix(conn, "awaken-"))
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "no service"
	}
	return strings.Join(names, ",")
}

// waitHealthy waits until every stream and bucket has a leader and two current
// followers: the cluster is whole again before the next fault.
func (c *containerCluster) waitHealthy(ctx context.Context, within time.Duration) error {
	return waitUntil(ctx, "cluster not whole", within, 250*time.Millisecond, func() string {
		for _, s := range c.streams {
			if why := c.unhealthy(ctx, s); why != "" {
				return why
			}
		}
		return ""
	})
}

func (c *containerCluster) unhealthy(ctx context.Context, stream string) string {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.admin.Stream(ictx, stream)
	if err != nil {
		return stream + ": " + err.Error()
	}
	info, err := st.Info(ictx)
	if err != nil {
		return stream + ": " + err.Error()
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return stream + ": no leader"
	}
	current := 0
	for _, p := range info.Cluster.Replicas {
		if p.Current && !p.Offline {
			current++
		}
	}
	if current < 2 {
		return fmt.Sprintf("%s: %d current followers of leader %s", stream, current, info.Cluster.Leader)
	}
	return ""
}

// diagnoseUnpublished logs, for the first unpublished batches, the phase of the batch
// and call records, whether an awaited approval is listed as a ticket, and every
// service's log lines about the run; then where every durable consumer stands.
func (c *containerCluster) diagnoseUnpublished(ctx context.Context, h checker.History) {
	info, err := c.resultsInfo(ctx)
	if err != nil {
		c.t.Logf("diagnosis: %v", err)
		return
	}
	phase := func(bucket, key string) string {
		kv, err := c.admin.KeyValue(ctx, bucket)
		if err != nil {
			return err.Error()
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			return err.Error()
		}
		var rec map[string]json.RawMessage
		if json.Unmarshal(e.Value(), &rec) != nil {
			return fmt.Sprintf("rev %d: %.200s", e.Revision(), e.Value())
		}
		return fmt.Sprintf("rev %d phase %.300s", e.Revision(), rec["phase"])
	}
	tickets := map[string]bool{}
	if list, err := c.client.Tickets(ctx); err == nil {
		for _, tk := range list {
			tickets[tk.CorrelationID] = true
		}
	}
	logs := map[string]string{}
	for _, name := range slices.Concat(c.d.Services(), c.d.Nodes()) {
		logs[name], _ = c.d.Logs(ctx, name)
	}
	n := 0
	for _, b := range h.Batches {
		sub := b.Submission
		// Published: its run's results subject holds its publication (as waitQuiescent).
		if info[c.names.ResultsSubject(sub.RunID)] > 0 || n >= 6 {
			continue
		}
		n++
		c.t.Logf("diagnosis %s (submitted %s): batch %s", sub.BatchID(), b.SubmittedAt.UTC().Format("15:04:05.000"),
			phase(c.names.Of(sub.RunID).BatchesBucket(), contracts.BatchKey(sub.RunID, sub.Step)))
		for _, call := range sub.Calls {
			corr := contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, call.CallID)
			c.t.Logf("  call %s %s: %s (ticket listed: %v)", call.CallID, call.ToolID,
				phase(c.names.Of(sub.RunID).CallsBucket(), contracts.CallKey(exampleTarget(call.ToolID), sub.RunID, sub.Step, call.CallID)), tickets[corr])
		}
		mention := sub.RunID + `"`
		for name, text := range logs {
			k := 0
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(line, mention) || strings.Contains(line, sub.RunID+":") || strings.Contains(line, sub.RunID+".") {
					if k++; k <= 25 {
						c.t.Logf("  %s: %.500s", name, line)
					}
				}
			}
		}
	}
	for _, stream := range c.streams {
		st, err := c.admin.Stream(ctx, stream)
		if err != nil {
			c.t.Logf("stream %s: %v", stream, err)
			continue
		}
		lister := st.ListConsumers(ctx)
		for ci := range lister.Info() {
			leader := ""
			if ci.Cluster != nil {
				leader = ci.Cluster.Leader
			}
			c.t.Logf("consumer %s/%s on %s: delivered %d, ack floor %d, pending %d, ack pending %d, redelivered %d, waiting %d",
				stream, ci.Name, leader, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
		}
	}
}

// dumpLogs logs the tail of every container's log.
func (c *containerCluster) dumpLogs(ctx context.Context) {
	for _, name := range slices.Concat(c.d.Nodes(), c.d.Services()) {
		logs, err := c.d.Logs(ctx, name)
		if err != nil {
			c.t.Logf("== %s: %v", name, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(logs), "\n")
		c.t.Logf("== %s (last lines of %d)", name, len(lines))
		for _, l := range lines[max(0, len(lines)-15):] {
			c.t.Log(l)
		}
	}
}

// promiseLine counts the violations of the promises the cluster run names.
func promiseLine(rep checker.Report) string {
	n := map[checker.Kind]int{}
	for _, v := range rep.Violations {
		n[v.Kind]++
	}
	return fmt.Sprintf("checker: lost=%d duplicated_results=%d never_replay_run_twice=%d published_more_than_once=%d unexplained_indeterminate=%d unauthorized=%d order=%d not_atomic=%d",
		rep.Lost, rep.Duplicates, n[checker.KindReplayed], n[checker.KindDuplicate], n[checker.KindUnexplained],
		n[checker.KindUnauthorized], n[checker.KindOrder], n[checker.KindNotAtomic])
}

// faultLines is one line per fault kind: how many faults, which nodes, how many batches
// were in flight during one (submitted before it healed, published after it began), and
// the checker's violations among those batches. A violation of a batch no fault touched
// gets its own line.
func faultLines(h checker.History, obs *checker.Observed, rep checker.Report, faults []fault) []string {
	published := map[string]time.Time{}
	for _, m := range obs.Results {
		var batchID string
		switch m.Type {
		case contracts.TypeBatchResults:
			var b contracts.BatchResults
			if json.Unmarshal(m.Data, &b) == nil {
				batchID = b.BatchID
			}
		case contracts.TypeBatchFinalized:
			var f contracts.BatchFinalized
			if json.Unmarshal(m.Data, &f) == nil {
				batchID = f.BatchID
			}
		}
		if _, seen := published[batchID]; batchID != "" && !seen {
			published[batchID] = m.Time
		}
	}
	violations := map[string]int{}
	for _, v := range rep.Violations {
		violations[v.BatchID]++
	}
	end := time.Now()
	exposedTo := func(b checker.Batch, f fault) bool {
		pub, ok := published[b.Submission.BatchID()]
		if !ok {
			pub = end
		}
		return !f.start.After(pub) && !f.end.Before(b.SubmittedAt)
	}
	var lines []string
	touched := map[string]bool{}
	for _, kind := range faultKinds {
		var nodes []string
		count := 0
		for _, f := range faults {
			if f.kind == kind {
				count++
				nodes = append(nodes, f.node)
			}
		}
		exposed, bad := 0, 0
		for _, b := range h.Batches {
			id := b.Submission.BatchID()
			if slices.ContainsFunc(faults, func(f fault) bool { return f.kind == kind && exposedTo(b, f) }) {
				exposed++
				bad += violations[id]
				touched[id] = true
			}
		}
		lines = append(lines, fmt.Sprintf("fault %-11s faults=%d nodes=%s batches_in_flight=%d violations=%d",
			kind, count, strings.Join(nodes, ","), exposed, bad))
	}
	untouched := 0
	for id, n := range violations {
		if !touched[id] {
			untouched += n
		}
	}
	lines = append(lines, fmt.Sprintf("fault %-11s batches no fault touched: violations=%d", "none", untouched))
	return lines
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// exampleTarget is the executor target examples/awaken.yaml pins tool to (the first token
// of its call keys): wc runs in the sandbox, the rest in the brain.
func exampleTarget(tool string) contracts.ToolExecutionTarget {
	switch tool {
	case "wc":
		return contracts.TargetSandbox
	}
	return contracts.TargetBrain
}
