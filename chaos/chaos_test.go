// Package chaos_test is the process-level chaos test: a real nats-server process and each
// awaken service as its own OS process, SIGKILLed at random moments while a mixed workload
// runs; after quiescence internal/checker verifies the streams and the body-run ledger.
//
// `go test ./chaos/` runs the short version (150 calls); `make chaos` runs the full one
// (AWAKEN_CHAOS=full: 1,000+ calls per variant). AWAKEN_CHAOS_SEED replays a run.
//
// TestRollingUpgrade (upgrade_test.go) runs the same processes at two versions — the
// previous one built from the repository's history, and HEAD — and replaces them one
// at a time under load, then rolls them back (docs/operations.md, "Upgrades and
// compatibility").
package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// profile sizes one chaos run.
type profile struct {
	calls       int
	chaosFor    time.Duration
	killEvery   [2]time.Duration // random interval between kills
	serverKills bool
}

func profileFor(t *testing.T, serverKills bool) profile {
	p := profile{calls: 150, chaosFor: 15 * time.Second, killEvery: [2]time.Duration{1500 * time.Millisecond, 3 * time.Second}, serverKills: serverKills}
	if os.Getenv("AWAKEN_CHAOS") == "full" {
		p = profile{calls: 1000, chaosFor: 60 * time.Second, killEvery: [2]time.Duration{500 * time.Millisecond, 2 * time.Second}, serverKills: serverKills}
	}
	if v, err := strconv.Atoi(os.Getenv("AWAKEN_CHAOS_CALLS")); err == nil && v > 0 {
		p.calls = v
	}
	return p
}

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("AWAKEN_CHAOS_SEED"), 10, 64); err == nil {
		s = v
	}
	t.Logf("seed %d (AWAKEN_CHAOS_SEED=%d replays the workload and the kill schedule; timing still varies)", s, s)
	return s
}

// TestChaos_killServices SIGKILLs random services (never the server). In the short
// version it is skipped: TestChaos_killServicesAndServer covers both kinds of kill.
func TestChaos_killServices(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: slow")
	}
	if os.Getenv("AWAKEN_CHAOS") != "full" {
		t.Skip("chaos: the services-only variant runs in `make chaos` (AWAKEN_CHAOS=full)")
	}
	runChaos(t, profileFor(t, false), seed(t))
}

// TestChaos_killServicesAndServer SIGKILLs random services and, sometimes, the nats-server
// process itself, which restarts on the same store directory and port.
func TestChaos_killServicesAndServer(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: slow")
	}
	runChaos(t, profileFor(t, true), seed(t))
}

func runChaos(t *testing.T, p profile, s uint64) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), p.chaosFor+4*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(s, s^0x5eed))
	cl := newCluster(t, ctx, s)
	w := newWorkload(rng, p.calls, 0, 20)
	t.Logf("workload: %d batches, %d calls", len(w.batches), w.calls)

	rec := newRecorder()
	// The workload, the approver and the chaos monkey run together for p.chaosFor.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	submitted := make(chan error, 1)
	go func() { submitted <- cl.submitAll(runCtx, w, rec, evenly(len(w.batches), p.chaosFor*2/3)) }()
	approverDone := make(chan struct{})
	go func() { defer close(approverDone); cl.approve(runCtx, w) }()
	cl.monkey(ctx, rng, p, rec)
	if err := <-submitted; err != nil {
		t.Fatalf("submit: %v", err)
	}
	if err := cl.allRunning(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos over after %s: %d kills; waiting for quiescence", time.Since(start).Round(time.Millisecond), len(rec.kills()))
	quiet := time.Now()
	if err := cl.waitQuiescent(ctx, w); err != nil {
		stopRun()
		<-approverDone
		cl.dumpLogs(t)
		t.Fatal(err)
	}
	stopRun()
	<-approverDone
	t.Logf("quiescent after %s", time.Since(quiet).Round(time.Millisecond))

	rep, err := cl.check(ctx, rec.history())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	fmt.Printf("%s (seed %d, server kills %v, %s)\n", rep.Summary(), s, p.serverKills, time.Since(start).Round(time.Second))
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	cl.reportExpiry(t, ctx)
	cl.reportDeadLetters(t, ctx)
	if rep.Calls < p.calls {
		t.Errorf("checked %d calls, want at least %d", rep.Calls, p.calls)
	}
	if rep.Kills == 0 {
		t.Error("no kill happened: the run proves nothing")
	}
	if t.Failed() {
		cl.dumpLogs(t)
	}
}
