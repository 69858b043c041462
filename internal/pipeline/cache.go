package pipeline

import (
	"sync"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// batchCacheSize bounds the batch cache: enough for every batch in flight on a busy host,
// so that a long-running service's memory does not grow with the number of batches it
// has ever seen (a record of ten calls decodes to about 5 KiB: 1,024 of them hold 5 MiB,
// where 4,096 held a sixth of `awaken dev`'s heap under the throughput benchmark).
const batchCacheSize = 1024

// batchCache holds the immutable part of recently used batch records. It evicts the
// oldest insertion first: a batch is used within seconds of its submission and then
// never again (a parked call's resume, hours later, just reads the store once more).
type batchCache struct {
	mu    sync.Mutex
	byKey map[string]*contracts.BatchRecord
	order []string // ring of keys in insertion order
	next  int      // where the next insertion goes in order
	size  int
}

func newBatchCache(size int) *batchCache {
	return &batchCache{byKey: make(map[string]*contracts.BatchRecord, size), order: make([]string, size), size: size}
}

// get and put on a nil cache (an Env built by hand, in tests) miss and do nothing.
func (c *batchCache) get(key string) (*contracts.BatchRecord, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.byKey[key]
	return rec, ok
}

func (c *batchCache) put(key string, rec *contracts.BatchRecord) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		c.byKey[key] = rec
		return
	}
	if old := c.order[c.next]; old != "" {
		delete(c.byKey, old)
	}
	c.order[c.next] = key
	c.byKey[key] = rec
	c.next = (c.next + 1) % c.size
}

func (c *batchCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}
