package execcore_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
)

// TestIncrementIsNeverLost: concurrent increments of one counter from many goroutines
// (each its own compare-and-swap loop) all count.
func TestIncrementIsNeverLost(t *testing.T) {
	e := exectest.New(t, testConfig)
	const workers, each = 6, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := execcore.Increment(e.Ctx, e.Counters, "counter.shared"); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, err := execcore.ReadCounter(e.Ctx, e.Counters, "counter.shared")
	if err != nil || n != workers*each {
		t.Fatalf("counter = %d (%v), want %d", n, err, workers*each)
	}
}

func TestIncrementEdges(t *testing.T) {
	e := exectest.New(t, testConfig)
	if n, err := execcore.ReadCounter(e.Ctx, e.Counters, "counter.none"); err != nil || n != 0 {
		t.Errorf("missing counter reads %d (%v), want 0", n, err)
	}
	if _, err := e.Counters.Put(e.Ctx, "counter.bad", []byte("seven")); err != nil {
		t.Fatal(err)
	}
	if _, err := execcore.Increment(e.Ctx, e.Counters, "counter.bad"); !errors.Is(err, execcore.ErrCorruptCounter) {
		t.Errorf("corrupt counter: %v", err)
	}
	if err := e.Counters.Delete(e.Ctx, "counter.gone"); err != nil {
		t.Fatal(err)
	}
	if n, err := execcore.Increment(e.Ctx, e.Counters, "counter.gone"); err != nil || n != 1 {
		t.Errorf("deleted counter restarts at %d (%v), want 1", n, err)
	}
	if got := execcore.LedgerKey("run-1", 3, "call_1"); got != "ledger.run-1.3.call_1" {
		t.Errorf("ledger key %q", got)
	}
}
