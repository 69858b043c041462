package gate

import (
	"sync"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// defaultPolicyCacheSize bounds the compiled run policies kept in memory. A batch is gated
// within minutes of its submission, so a few thousand recent batches cover every batch in
// flight on one replica; an evicted entry is simply compiled again.
const defaultPolicyCacheSize = 4096

// compiled is one compiled run policy, or the error that compiling it produced. Errors are
// cached too: a policy that does not compile never will, and every call of its batch must
// see the same answer.
type compiled struct {
	policy *contracts.Policy
	err    error
}

// policyCache holds the compiled run policy of recent batches, keyed by batch key. The
// submission of a batch is immutable, so an entry never goes stale; the cache is bounded
// and evicts in insertion order. It is safe for concurrent use.
type policyCache struct {
	mu    sync.Mutex
	max   int
	byKey map[string]compiled
	order []string // insertion order, oldest first
}

func newPolicyCache(max int) *policyCache {
	if max <= 0 {
		max = defaultPolicyCacheSize
	}
	return &policyCache{max: max, byKey: make(map[string]compiled)}
}

// get returns the compiled form of cfg, the run policy of batch key, compiling it at most
// once per cache residency. Two goroutines racing on a cold key may both compile; the
// result is the same, so that costs only CPU.
func (c *policyCache) get(key string, cfg contracts.PolicyConfig) (*contracts.Policy, error) {
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.mu.Unlock()
		return e.policy, e.err
	}
	c.mu.Unlock()

	p, err := contracts.CompilePolicy(cfg)

	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; !ok {
		if len(c.order) >= c.max {
			oldest := c.order[0]
			c.order = c.order[1:]
			delete(c.byKey, oldest)
		}
		c.byKey[key] = compiled{policy: p, err: err}
		c.order = append(c.order, key)
	}
	return p, err
}

// len reports how many policies are cached (tests).
func (c *policyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}
