package publisher

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// defaultProgressEntries bounds how many parallel batches the barrier remembers progress
// for at once.
const defaultProgressEntries = 4096

// progressCache remembers, per parallel batch, which calls this process has already seen
// terminal. A parallel batch completes in any order, so every one of its outputs must
// check the barrier; without memory that is a scan of every call per output — quadratic
// in the batch size. Terminal is absorbing (a terminal call record never changes), so a
// call once seen terminal need never be read again, and each output costs the reads of
// the calls not yet seen terminal, stopping at the first that is not.
//
// The cache is an optimisation only: losing it (a restart, another replica handling the
// output, eviction) costs reads, never correctness, and the final decision is always
// re-checked against the records. It is safe for concurrent use.
type progressCache struct {
	mu      sync.Mutex
	max     int
	batches map[string]*progress
}

// progress is what one batch's barrier has seen. Its mutex serialises the barrier checks
// of one batch in this process, so concurrent outputs of one batch do not read the same
// records twice.
type progress struct {
	mu       sync.Mutex
	terminal []bool
}

func newProgressCache(max int) *progressCache {
	return &progressCache{max: max, batches: make(map[string]*progress)}
}

// get returns the progress of batch key with n calls, creating it if needed.
func (c *progressCache) get(key string, n int) *progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.batches[key]
	if ok && len(p.terminal) == n {
		return p
	}
	if len(c.batches) >= c.max {
		// Forget everything rather than track recency: entries of published batches are
		// removed as they publish, so reaching the bound means many stale entries.
		clear(c.batches)
	}
	p = &progress{terminal: make([]bool, n)}
	c.batches[key] = p
	return p
}

// forget drops the progress of batch key (it is published).
func (c *progressCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.batches, key)
}

// allTerminal reports whether every call of rec is terminal, reading only the calls not
// yet seen terminal, in model order, up to the first that is not. The reads go to the
// leader of the calls bucket's stream: a "not terminal" here acknowledges the output, so
// it must not come from a replica behind the call's terminal write (see terminalCalls).
func (c *progressCache) allTerminal(ctx context.Context, calls *state.Store[contracts.CallRecord], rec *contracts.BatchRecord) (bool, error) {
	sub := &rec.Submission
	p := c.get(contracts.BatchKey(sub.RunID, sub.Step), len(sub.Calls))
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range sub.Calls {
		if p.terminal[i] {
			continue
		}
		cr, _, err := calls.GetFromLeader(ctx, contracts.CallKeyOf(rec, i))
		switch {
		case errors.Is(err, state.ErrNotFound):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("publisher: barrier of %s: %w", sub.BatchID(), err)
		case !cr.Phase.IsTerminal():
			return false, nil
		}
		p.terminal[i] = true
	}
	return true, nil
}
