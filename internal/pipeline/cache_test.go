package pipeline

import (
	"strconv"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestBatchCacheIsBoundedAndEvictsTheOldest(t *testing.T) {
	c := newBatchCache(3)
	for i := range 5 {
		c.put("b"+strconv.Itoa(i), &contracts.BatchRecord{Hash: strconv.Itoa(i)})
	}
	if n := c.len(); n != 3 {
		t.Fatalf("cache holds %d records, want 3", n)
	}
	for i := range 2 {
		if _, ok := c.get("b" + strconv.Itoa(i)); ok {
			t.Fatalf("b%d survived eviction", i)
		}
	}
	for i := 2; i < 5; i++ {
		rec, ok := c.get("b" + strconv.Itoa(i))
		if !ok || rec.Hash != strconv.Itoa(i) {
			t.Fatalf("b%d: %v %v", i, rec, ok)
		}
	}
	// Storing a key again replaces it without evicting another.
	c.put("b4", &contracts.BatchRecord{Hash: "again"})
	if rec, _ := c.get("b4"); rec.Hash != "again" || c.len() != 3 {
		t.Fatalf("re-put: %v, %d records", rec, c.len())
	}
	if _, ok := c.get("b2"); !ok {
		t.Fatal("re-putting b4 evicted b2")
	}
}
