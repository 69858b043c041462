package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// driver plays the platform's part in a chaos run, whatever runs the pipeline (OS
// processes or containers): it submits the workload, approves the ask_me tickets, waits
// for quiescence and runs the checker.
type driver struct {
	cfg          *config.Config
	names        contracts.Names
	client       *client.Client
	js           jetstream.JetStream // reads the streams and the ledger for the checker
	tail         *checker.Tail       // the checker's reading of the streams as the run goes on
	lastApprove  map[string]time.Time
	approveSlots chan struct{}
}

// newDriver submits and approves over submitter and reads what the checker needs over
// reader (which may be the same connection). Every service runs configYAML.
func newDriver(submitter, reader *nats.Conn, configYAML string) (*driver, error) {
	cfg, err := config.Parse([]byte(configYAML))
	if err != nil {
		return nil, err
	}
	c := &driver{cfg: cfg, names: cfg.Names(), lastApprove: map[string]time.Time{}, approveSlots: make(chan struct{}, 8)}
	if c.client, err = client.New(submitter); err != nil {
		return nil, err
	}
	if c.js, err = jetstream.New(reader); err != nil {
		return nil, err
	}
	return c, nil
}

// follow starts the checker's reading of the streams (checker.Follow): call it before the
// first submission. It ends with tb.
func (c *driver) follow(tb testing.TB) {
	c.tail = checker.Follow(context.Background(), c.js, c.names)
	tb.Cleanup(c.tail.Stop)
}

// evenly paces a submission loop: batch i of n goes at start + spread*i/n.
func evenly(n int, spread time.Duration) func(context.Context, int) error {
	start := time.Now()
	return func(ctx context.Context, i int) error {
		select {
		case <-time.After(time.Until(start.Add(spread * time.Duration(i) / time.Duration(n)))):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// submitAll submits every batch, each once pace lets it go, retrying each until the
// stream acknowledges it (the client's deterministic event id makes a retry of a
// submission that was stored but not acknowledged a duplicate the stream drops).
func (c *driver) submitAll(ctx context.Context, w *workload, rec *recorder, pace func(ctx context.Context, i int) error) error {
	for i, b := range w.batches {
		if err := pace(ctx, i); err != nil {
			return err
		}
		rec.submitted(b, time.Now())
		for {
			attempt, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := c.client.Submit(attempt, b.Submission)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return fmt.Errorf("batch %s: %w (last error %v)", b.Submission.BatchID(), ctx.Err(), err)
			}
		}
	}
	return nil
}

// approve answers every open ask_me ticket with allow, retrying an answer that got no
// reply (lost to a kill) after three seconds, until ctx ends.
func (c *driver) approve(ctx context.Context, w *workload) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		list, cancel := context.WithTimeout(ctx, 2*time.Second)
		tickets, err := c.client.Tickets(list)
		cancel()
		if err != nil {
			continue
		}
		for _, tk := range tickets {
			if tk.Reason != contracts.ReasonPermission || tk.ToolID != "ask_me" {
				continue
			}
			if last, ok := c.lastApprove[tk.CorrelationID]; ok && time.Since(last) < 3*time.Second {
				continue
			}
			select {
			case c.approveSlots <- struct{}{}:
			default:
				continue
			}
			c.lastApprove[tk.CorrelationID] = time.Now()
			inflight.Go(func() {
				defer func() { <-c.approveSlots }()
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				_, _ = c.client.Approve(actx, tk, "chaos")
			})
		}
	}
}

// waitQuiescent waits until every submitted batch is published: its run's results subject
// holds its publication (each run has one batch, and a publication — one results message,
// or the atomic batch of a batch too large for one — is stored whole or not at all).
func (c *driver) waitQuiescent(ctx context.Context, w *workload) error {
	var missing []string
	return waitUntil(ctx, "not quiescent", 3*time.Minute, 500*time.Millisecond, func() string {
		missing = missing[:0]
		info, err := c.resultsInfo(ctx)
		if err == nil {
			for _, b := range w.batches {
				sub := b.Submission
				if info[c.names.ResultsSubject(sub.RunID)] == 0 {
					missing = append(missing, sub.BatchID())
				}
			}
			if len(missing) == 0 {
				return ""
			}
		}
		slices.Sort(missing)
		return fmt.Sprintf("%d batches unpublished (%v), last error %v", len(missing), missing[:min(10, len(missing))], err)
	})
}

// waitUntil asks check every interval whether there is still something to wait for (it
// says what, or "" once there is nothing), and gives up after within with an error that
// says what, "<what> after <within>: <what check said last>", or as soon as ctx ends.
func waitUntil(ctx context.Context, what string, within, interval time.Duration, check func() string) error {
	deadline := time.Now().Add(within)
	for {
		why := check()
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s after %s: %s", what, within, why)
		}
		if err := ctxsleep.Sleep(ctx, interval); err != nil {
			return err
		}
	}
}

func (c *driver) resultsInfo(ctx context.Context) (map[string]uint64, error) {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Every partition's results stream: subjects are per partition, so they never collide.
	out := map[string]uint64{}
	for _, pn := range c.names.EachPartition() {
		s, err := c.js.Stream(ictx, pn.ResultsStream())
		if err != nil {
			return nil, err
		}
		info, err := s.Info(ictx, jetstream.WithSubjectFilter(pn.ResultsWildcard()))
		if err != nil {
			return nil, err
		}
		for subject, n := range info.State.Subjects {
			out[subject] = n
		}
	}
	return out, nil
}

// check takes what the tail read of the streams, with the ledger, and runs the checker;
// it returns what it read too, for a caller that attributes violations to faults.
func (c *driver) check(ctx context.Context, h checker.History) (checker.Report, *checker.Observed, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	obs, err := c.tail.Snapshot(rctx)
	if err != nil {
		return checker.Report{}, nil, err
	}
	return checker.Check(h, obs, checker.RulesFor(c.cfg)), obs, nil
}

// reportExpiry prints the evidence that records expired during the run (the summary line
// `make chaos` and `make chaos-cluster` show) and fails the run if none did: a run without
// expiry proves nothing of it.
func (c *driver) reportExpiry(t *testing.T, ctx context.Context) {
	t.Helper()
	exp, err := c.tail.Expiries(ctx)
	if err != nil {
		t.Errorf("expiry evidence: %v", err)
		return
	}
	t.Log(exp.Summary(c.names))
	fmt.Println(exp.Summary(c.names))
	if exp.ArchivesExpired == 0 || exp.RunRecordsExpired == 0 {
		t.Errorf("%s: no batch archive or no run record expired during the run", exp.Summary(c.names))
	}
}

// reportDeadLetters prints how many dead letters the run left and fails the run on each:
// the workload is valid input, so every one is work a service gave up under the faults.
func (c *driver) reportDeadLetters(t *testing.T, ctx context.Context) {
	t.Helper()
	dead := servicetest.ReadStored(t, ctx, c.js, c.names.DeadLetterStream(), c.names.DeadLetterSubject("*"), false)
	fmt.Printf("dead letters: dead_letters=%d\n", len(dead))
	for _, m := range dead {
		t.Errorf("dead letter: consumer %s, code %s, delivered %s on %s: %s",
			m.Header.Get(bus.HeaderConsumer), m.Header.Get(bus.HeaderDeadCode), m.Header.Get(bus.HeaderDelivered),
			m.Header.Get(bus.HeaderOriginalSubject), m.Header.Get(bus.HeaderDeadReason))
	}
}
