package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/health"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/awakentest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestContainers_singleServer runs the compose topology — one JetStream server, setup,
// the five services and the api, brain-exec scaled to 3 — in containers, and proves on it
// the acceptance flow, an approval through the api, exactly-once execution across
// executor replicas, the health endpoints, the permissions, and recovery from a killed
// service. The subtests share
// the deployment and run in order; the kill comes last.
func TestContainers_singleServer(t *testing.T) {
	// The example configuration with a 5 s ack wait for the 30 s default: the kill subtest
	// waits one ack wait for the killed gate's unsettled messages to come back.
	cfg, err := os.ReadFile(filepath.Join("..", "examples", "awaken.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, "\nconsumers:\n  ack_wait: 5s\n"...)
	d := run(t, awakentest.Options{BrainExecReplicas: 3, ConfigYAML: cfg})
	admin := adminJS(t, d)
	names := contracts.NewNames("")

	t.Run("acceptance flow", func(t *testing.T) { acceptanceFlow(t, d.Client, "containers") })

	t.Run("the api approves over HTTP and serves the batch", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		base, err := d.APIURL(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sub := batch("containers-api", 1, []string{"ask_me", "echo"},
			call("c1", "ask_me", map[string]any{}), call("c2", "echo", map[string]any{"text": "after"}))
		tk := stacktest.Park(t, ctx, d.Client, sub, "c1")
		if status, body := apiDo(t, ctx, "POST", base, "/v1/tickets/"+tk.CorrelationID+"/approve", httpapi.ApproveRequest{Note: "ok"}, nil); status != http.StatusOK {
			t.Fatalf("approve over HTTP: %d %s", status, body)
		}
		res, err := d.Client.Await(ctx, sub.RunID, 1)
		if err != nil {
			t.Fatal(err)
		}
		wantTexts(t, res, "", "after")
		var view httpapi.BatchView
		if status, body := apiDo(t, ctx, "GET", base, "/v1/batches/"+res.BatchID, nil, &view); status != http.StatusOK || view.Terminal != 2 {
			t.Errorf("GET batch: %d, %d terminal calls: %s", status, view.Terminal, body)
		}
	})

	t.Run("brain-exec x3: every counter body runs exactly once", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		cons, err := admin.Consumer(ctx, names.CallRecordsStream(), contracts.ConsumerBrainExec)
		if err != nil {
			t.Fatal(err)
		}
		// Every replica keeps a pull request open on the one durable.
		waitFor(t, ctx, "3 replicas pulling from "+contracts.ConsumerBrainExec, func() (bool, error) {
			info, err := cons.Info(ctx)
			return err == nil && info.NumWaiting >= 3, err
		})
		const batches, calls = 24, 5
		var wg sync.WaitGroup
		values := make(chan string, batches*calls)
		errs := make(chan error, batches)
		for b := range batches {
			wg.Go(func() {
				var cs []contracts.ToolCall
				for i := range calls {
					cs = append(cs, call(fmt.Sprintf("c%d", i), "counter", map[string]any{"name": "scaled"}))
				}
				res, err := d.Client.SubmitAndWait(ctx, batch(fmt.Sprintf("scale-%d", b), 1, []string{"counter"}, cs...))
				if err != nil {
					errs <- err
					return
				}
				prev := 0
				for _, r := range res.Results {
					values <- r.Output.Text()
					n, _ := strconv.Atoi(r.Output.Text())
					if n <= prev {
						errs <- fmt.Errorf("%s: counter values %d then %d: model order broken", res.BatchID, prev, n)
					}
					prev = n
				}
			})
		}
		wg.Wait()
		close(values)
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Each body ran exactly once: the values seen are exactly 1..N, and so is the count.
		var got []int
		for v := range values {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("counter result %q", v)
			}
			got = append(got, n)
		}
		slices.Sort(got)
		for i, n := range got {
			if n != i+1 {
				t.Fatalf("counter values %v are not exactly 1..%d: a body ran twice or not at all", got, batches*calls)
			}
		}
		if n, err := checker.Counter(ctx, d.Client, "scaled"); err != nil || n != batches*calls {
			t.Fatalf("counter = %d (%v), want %d calls", n, err, batches*calls)
		}
	})

	t.Run("health endpoints and container health checks", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		for _, s := range d.Services() {
			url, err := d.ReadyURL(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := health.Probe(ctx, url, 5*time.Second); err != nil {
				t.Errorf("%s: %v", s, err)
			}
			c, _ := d.Container(s)
			waitFor(t, ctx, s+" healthy (awaken healthcheck in the container)", func() (bool, error) {
				st, err := c.State(ctx)
				if err != nil || st.Health == nil {
					return false, err
				}
				return st.Health.Status == "healthy", nil
			})
		}
	})

	t.Run("permissions hold in the containers", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		for _, tc := range []struct{ user, subject string }{
			{deploy.UserPlatform, names.CallRecordSubject(contracts.CallKey(contracts.TargetBrain, "forged", 1, "c1"))},
			{deploy.UserPlatform, names.ResultsSubject("forged")},
			{"brain-exec", names.ResultsSubject("forged")},
			{"brain-exec", names.TicketResolvedSubject()},
			{"sandbox-exec", names.RunRecordSubject("forged")},
			{deploy.UserAPI, names.CallRecordSubject(contracts.CallKey(contracts.TargetBrain, "forged", 1, "c1"))},
			{deploy.UserAPI, names.ResultsSubject("forged")},
		} {
			violation := make(chan error, 1)
			nc, err := d.Connect(tc.user, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				if errors.Is(err, nats.ErrPermissionViolation) {
					select {
					case violation <- err:
					default:
					}
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Publish(tc.subject, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			_ = nc.Flush()
			select {
			case err := <-violation:
				if !strings.Contains(err.Error(), tc.subject) {
					t.Errorf("%s: violation %v does not name %s", tc.user, err, tc.subject)
				}
			case <-ctx.Done():
				t.Errorf("%s could publish to %s", tc.user, tc.subject)
			}
			nc.Close()
		}
	})

	t.Run("a killed service restarts; every batch publishes once, in order", func(t *testing.T) {
		ctx := ctxFor(t, 3*time.Minute)
		const batches = 30
		subs := make([]contracts.BatchSubmission, batches)
		for i := range subs {
			subs[i] = batch(fmt.Sprintf("kill-%d", i), 1, []string{"echo", "slow"},
				call("c0", "echo", map[string]any{"text": "a"}),
				call("c1", "slow", map[string]any{"ms": 50}),
				call("c2", "echo", map[string]any{"text": "b"}))
			if _, err := d.Client.Submit(ctx, subs[i]); err != nil {
				t.Fatal(err)
			}
		}
		// Kill the gate once the pipeline is busy with them, then start it again.
		if _, err := d.Client.Await(ctx, subs[0].RunID, 1); err != nil {
			t.Fatal(err)
		}
		if err := d.Kill(ctx, awakentest.Gate); err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx, awakentest.Gate); err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			res, err := d.Client.Await(ctx, s.RunID, 1)
			if err != nil {
				t.Fatal(err)
			}
			wantTexts(t, res, "a", "done", "b")
		}
		assertPublishedOnce(t, admin, subs)
	})
}

// TestContainers_cluster runs the clustered topology (3 JetStream nodes, every stream and
// bucket at 3 replicas) and stops the node leading the submissions stream while a few
// hundred batches are in flight: every batch whose submission was acknowledged still
// publishes, exactly once; then the node comes back and the cluster is whole again.
func TestContainers_cluster(t *testing.T) {
	// The example configuration with a host concurrency limit on slow (the last phase).
	cfg, err := os.ReadFile(filepath.Join("..", "examples", "awaken.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cfg, []byte("\npolicy:\n")) {
		t.Fatal("examples/awaken.yaml has no top-level policy: section")
	}
	cfg = bytes.Replace(cfg, []byte("\npolicy:\n"), fmt.Appendf(nil, "\npolicy:\n  limits:\n    - { name: slow-at-once, tools: [slow], key: global, concurrency: %d }\n", clusterSlots), 1)
	d := run(t, awakentest.Options{Cluster: true, ConfigYAML: cfg})
	admin := adminJS(t, d)
	names := contracts.NewNames("")
	ctx := ctxFor(t, 4*time.Minute)
	logConnEvents(t, "client", d.Client.Conn())

	// Every stream and bucket is replicated three times.
	var streams []string
	for sc := range admin.StreamNames(ctx).Name() {
		streams = append(streams, sc)
	}
	// The set grows with the product (the tools and runs buckets came later), so the ones
	// the pipeline cannot do without are named rather than counted.
	for _, want := range []string{names.SubmissionsStream(), names.ResultsStream(),
		names.DeadLetterStream(), "KV_" + names.BatchesBucket(), "KV_" + names.CallsBucket()} {
		if !slices.Contains(streams, want) {
			t.Fatalf("streams %v, want %s among them", streams, want)
		}
	}
	for _, s := range streams {
		st, err := admin.Stream(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("%s has %d replicas, want 3", s, r)
		}
	}

	leaderOf := func(stream string) string {
		st, err := admin.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			t.Fatalf("leader of %s: %v", stream, err)
		}
		return info.Cluster.Leader
	}
	leader := leaderOf(names.SubmissionsStream())
	t.Logf("leader of %s: %s (run records: %s, call records: %s, results: %s)", names.SubmissionsStream(), leader,
		leaderOf(names.RunRecordsStream()), leaderOf(names.CallRecordsStream()), leaderOf(names.ResultsStream()))

	const batches = 300
	subs := make([]contracts.BatchSubmission, batches)
	for i := range subs {
		subs[i] = batch(fmt.Sprintf("fail-%d", i), 1, []string{"echo"},
			call("c0", "echo", map[string]any{"text": "x"}), call("c1", "echo", map[string]any{"text": "y"}))
	}
	// Submit from 8 workers; a submission that fails during the failover is retried with
	// the same id (deduplicated) until it is acknowledged — only acknowledged batches are
	// promised.
	acked := make(chan int, batches)
	next := make(chan int, batches)
	for i := range batches {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				for ctx.Err() == nil {
					sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := d.Client.Submit(sctx, subs[i])
					cancel()
					if err == nil {
						acked <- i
						break
					}
				}
			}
		})
	}
	// Stop the leader once a third of the batches are acknowledged, i.e. mid-load.
	for range batches / 3 {
		select {
		case <-acked:
		case <-ctx.Done():
			t.Fatal("submissions stalled before the failover")
		}
	}
	stopped := time.Now()
	if err := d.Stop(ctx, leader, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(acked)
	t.Logf("leader %s stopped; all %d submissions acknowledged %s later; new leader %s", leader, batches,
		time.Since(stopped).Round(time.Millisecond), leaderOf(names.SubmissionsStream()))

	// Every batch publishes, once. A slow wait is logged with how long it took: the
	// services may have published everything while the client's read of the results
	// stream is what stalls across the failover.
	for _, s := range subs {
		began := time.Now()
		watch := time.AfterFunc(5*time.Second, func() { logResultsConsumers(t, admin, s.BatchID()) })
		res, err := d.Client.Await(ctx, s.RunID, 1)
		watch.Stop()
		if took := time.Since(began); took > 2*time.Second {
			t.Logf("await of %s took %s (%s after the stop)", s.BatchID(), took.Round(time.Millisecond),
				time.Since(stopped).Round(time.Millisecond))
		}
		if err != nil {
			diagnoseBatch(t, admin, s)
			t.Fatal(err)
		}
		wantTexts(t, res, "x", "y")
	}
	t.Logf("all %d batches published %s after the stop", batches, time.Since(stopped).Round(time.Millisecond))
	assertPublishedOnce(t, admin, subs)

	// Bring the node back: it rejoins and catches up.
	if err := d.Start(ctx, leader); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, leader+" current again on every stream", func() (bool, error) {
		for _, s := range streams {
			st, err := admin.Stream(ctx, s)
			if err != nil {
				return false, err
			}
			info, err := st.Info(ctx)
			if err != nil || info.Cluster == nil {
				return false, err
			}
			ok := info.Cluster.Leader == leader
			for _, p := range info.Cluster.Replicas {
				ok = ok || (p.Name == leader && p.Current)
			}
			if !ok {
				return false, nil
			}
		}
		return true, nil
	})
	res, err := d.Client.SubmitAndWait(ctx, batch("after-rejoin", 1, []string{"echo"}, call("c0", "echo", map[string]any{"text": "back"})))
	if err != nil {
		t.Fatal(err)
	}
	wantTexts(t, res, "back")

	t.Run("a concurrency limit holds across the cluster", func(t *testing.T) { clusterConcurrency(t, d, admin) })
}

// clusterSlots is the concurrency of slow in the cluster test's configuration.
const clusterSlots = 3

// clusterConcurrency submits 12 runs of one slow call each (2 s) under a global
// concurrency of clusterSlots, on the 3-node cluster (ledger and records at 3 replicas):
// the ledger fills its slots and queues the rest, every call runs once, and no more than
// clusterSlots bodies overlap — each body lies between its call's entered and completed
// marks, which its executor writes before and after it, so the most of those intervals that
// overlap bounds the bodies that ran at once.
func clusterConcurrency(t *testing.T, d *awakentest.Deployment, admin jetstream.JetStream) {
	ctx := ctxFor(t, 2*time.Minute)
	names := contracts.NewNames("")
	const runs = 12
	var subs []contracts.BatchSubmission
	for i := range runs {
		sub := batch(fmt.Sprintf("slots-%d", i), 1, []string{"slow"}, call("c0", "slow", map[string]any{"ms": 2000}))
		if _, err := d.Client.Submit(ctx, sub); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	ledger, err := admin.KeyValue(ctx, names.LimitsBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := contracts.LimitLedgerKey("slow-at-once", "", time.Time{})
	waitFor(t, ctx, "every slot taken and calls queued", func() (bool, error) {
		e, err := ledger.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var entry contracts.LimitLedgerEntry
		err = contracts.DecodeRecordStrict(e.Value(), &entry)
		return err == nil && len(entry.Held) == clusterSlots && len(entry.Waiting) > 0, err
	})
	calls, err := admin.KeyValue(ctx, names.CallsBucket())
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ from, to time.Time }
	var spans []span
	for _, sub := range subs {
		res, err := d.Client.Await(ctx, sub.RunID, 1)
		if err != nil {
			t.Fatal(err)
		}
		wantTexts(t, res, "done")
		keys, err := calls.ListKeysFiltered(ctx, "*."+sub.RunID+".>")
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys.Keys() {
			e, err := calls.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			var rec contracts.CallRecord
			err = contracts.DecodeRecordStrict(e.Value(), &rec)
			if err != nil {
				t.Fatal(err)
			}
			from, ok1 := rec.MarkTime(contracts.StageEntered)
			to, ok2 := rec.MarkTime(contracts.StageCompleted)
			if !ok1 || !ok2 {
				t.Fatalf("call %s has no entered and completed marks: %+v", k, rec.Timeline)
			}
			spans = append(spans, span{from, to})
		}
	}
	if len(spans) != runs {
		t.Fatalf("%d call records, want %d", len(spans), runs)
	}
	most := 0
	for _, a := range spans {
		at := 0
		for _, b := range spans {
			if !b.from.After(a.from) && b.to.After(a.from) {
				at++ // b runs at the moment a starts
			}
		}
		most = max(most, at)
	}
	t.Logf("at most %d of %d slow bodies ran at once (limit %d)", most, runs, clusterSlots)
	if most > clusterSlots {
		t.Fatalf("%d bodies ran at once, over the limit of %d", most, clusterSlots)
	}
	waitFor(t, ctx, "every slot given back", func() (bool, error) {
		e, err := ledger.Get(ctx, key)
		if err != nil {
			return false, err
		}
		var entry contracts.LimitLedgerEntry
		err = contracts.DecodeRecordStrict(e.Value(), &entry)
		return err == nil && entry.Used == 0 && len(entry.Waiting) == 0 && len(entry.Handed) == 0, err
	})
}

// logConnEvents logs the disconnections, reconnections and asynchronous errors of nc
// while the test runs, with the server involved: a client stalled by a failover shows
// here.
func logConnEvents(t *testing.T, who string, nc *nats.Conn) {
	var over atomic.Bool
	t.Cleanup(func() { over.Store(true) })
	logf := func(format string, args ...any) {
		if !over.Load() {
			t.Logf("%s %s: "+format, append([]any{time.Now().UTC().Format("15:04:05.000"), who}, args...)...)
		}
	}
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) { logf("disconnected from %s: %v", c.ConnectedUrl(), err) })
	nc.SetReconnectHandler(func(c *nats.Conn) { logf("reconnected to %s (%s)", c.ConnectedUrl(), c.ConnectedServerName()) })
	nc.SetErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		subject := ""
		if sub != nil {
			subject = sub.Subject
		}
		logf("async error on %q: %v", subject, err)
	})
	logf("connected to %s (%s)", nc.ConnectedUrl(), nc.ConnectedServerName())
}

// logResultsConsumers logs every consumer of the results stream with the node that
// hosts it, while a wait for batchID is slow: a client's read stalled on a consumer
// placed on the stopped node shows here.
func logResultsConsumers(t *testing.T, js jetstream.JetStream, batchID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, contracts.NewNames("").ResultsStream())
	if err != nil {
		t.Logf("slow await of %s: results stream: %v", batchID, err)
		return
	}
	lister := st.ListConsumers(ctx)
	n := 0
	for info := range lister.Info() {
		n++
		leader := ""
		if info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		t.Logf("slow await of %s: consumer %s on %q (created %s): delivered %d, waiting %d, pending %d",
			batchID, info.Name, leader, info.Created.UTC().Format("15:04:05.000"), info.Delivered.Stream, info.NumWaiting, info.NumPending)
	}
	t.Logf("slow await of %s: %d results consumers (%v)", batchID, n, lister.Err())
}

// adminJS connects as the NATS admin user, for inspection only.
func adminJS(t *testing.T, d *awakentest.Deployment) jetstream.JetStream {
	t.Helper()
	nc, err := d.Connect(deploy.UserAdmin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// assertPublishedOnce checks the results stream itself: each batch's run subject holds
// exactly one message per call plus its finalized event — nothing was published twice —
// and the finalized event is last.
// diagnoseBatch logs where an unpublished batch stands: its record's phase, each call's
// phase, and what the results stream holds on its run's subject.
func diagnoseBatch(t *testing.T, js jetstream.JetStream, s contracts.BatchSubmission) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := contracts.NewNames("")
	get := func(bucket, key string) string {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return "bucket: " + err.Error()
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("rev %d: %.300s", e.Revision(), e.Value())
	}
	t.Logf("diagnosis of %s: batch record %s", s.BatchID(), get(names.BatchesBucket(), contracts.BatchKey(s.RunID, s.Step)))
	for _, c := range s.Calls {
		t.Logf("  call %s: %s", c.CallID, get(names.CallsBucket(), contracts.CallKey(exampleTarget(c.ToolID), s.RunID, s.Step, c.CallID)))
	}
	if st, err := js.Stream(ctx, names.ResultsStream()); err == nil {
		m, err := st.GetLastMsgForSubject(ctx, names.ResultsSubject(s.RunID))
		if err != nil {
			t.Logf("  results: %v", err)
		} else {
			t.Logf("  results: last message seq %d, id %s", m.Sequence, m.Header.Get("Nats-Msg-Id"))
		}
	}
	if st, err := js.Stream(ctx, names.RunRecordsStream()); err == nil {
		logConsumer(t, ctx, st, contracts.ConsumerGateBatches)
	}
	if st, err := js.Stream(ctx, names.CallRecordsStream()); err == nil {
		for _, durable := range []string{contracts.ConsumerGateOutputs, contracts.ConsumerBrainExec, contracts.ConsumerSandboxExec, contracts.ConsumerPublisher} {
			logConsumer(t, ctx, st, durable)
		}
	}
	if st, err := js.Stream(ctx, names.SubmissionsStream()); err == nil {
		logConsumer(t, ctx, st, contracts.ConsumerBatcherSubmit)
	}
	logDeadLetters(t, ctx, js, s.RunID)
}

// logConsumer logs where a durable consumer stands: a message exhausted or stuck
// unacknowledged during a failover shows here.
func logConsumer(t *testing.T, ctx context.Context, st jetstream.Stream, durable string) {
	t.Helper()
	c, err := st.Consumer(ctx, durable)
	if err != nil {
		t.Logf("  consumer %s: %v", durable, err)
		return
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Logf("  consumer %s: %v", durable, err)
		return
	}
	leader := ""
	if info.Cluster != nil {
		leader = info.Cluster.Leader
	}
	t.Logf("  consumer %s (leader %s): pending %d, ack pending %d, redelivered %d, waiting %d, ack floor %d, delivered %d",
		durable, leader, info.NumPending, info.NumAckPending, info.NumRedelivered, info.NumWaiting,
		info.AckFloor.Stream, info.Delivered.Stream)
}

// logDeadLetters logs every dead-lettered message that concerns runID (a message that
// exhausted its deliveries during the failover is one way a batch is left behind), and
// how many the dead-letter stream holds in all.
func logDeadLetters(t *testing.T, ctx context.Context, js jetstream.JetStream, runID string) {
	t.Helper()
	names := contracts.NewNames("")
	st, err := js.Stream(ctx, names.DeadLetterStream())
	if err != nil {
		t.Logf("  dead letters: %v", err)
		return
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Logf("  dead letters: %v", err)
		return
	}
	t.Logf("  dead letters: %d in all", info.State.Msgs)
	if info.State.Msgs == 0 {
		return
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Logf("  dead letters: %v", err)
		return
	}
	batch, err := cons.Fetch(int(min(info.State.Msgs, 1000)), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Logf("  dead letters: %v", err)
		return
	}
	for m := range batch.Messages() {
		h := m.Headers()
		if strings.Contains(h.Get(bus.HeaderOriginalSubject), runID) || strings.Contains(string(m.Data()), runID) {
			t.Logf("  dead letter on %s: consumer %s, code %s, delivered %s, reason %s",
				m.Subject(), h.Get(bus.HeaderConsumer), h.Get(bus.HeaderDeadCode), h.Get(bus.HeaderDelivered), h.Get(bus.HeaderDeadReason))
		}
	}
}

func assertPublishedOnce(t *testing.T, js jetstream.JetStream, subs []contracts.BatchSubmission) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	names := contracts.NewNames("")
	st, err := js.Stream(ctx, names.ResultsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(names.ResultsWildcard()))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		subject := names.ResultsSubject(s.RunID)
		if got := info.State.Subjects[subject]; got != 1 {
			t.Errorf("%s holds %d messages, want 1 (the batch's one results message)", subject, got)
			continue
		}
		last, err := st.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := cloudevent.DecodeMsg(last.Header, last.Data)
		if err != nil || ev.Type != contracts.TypeBatchResults {
			t.Errorf("%s: last message %v (%v), want the results message", subject, ev.Type, err)
		}
	}
}

// waitFor polls cond every 250ms until it holds, failing the test when ctx ends first.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	for n := 0; ; n++ {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		if n == 0 {
			t.Logf("waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last error: %v)", what, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
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
