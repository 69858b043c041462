package state_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/state"
)

// TestPartitionedStoreRoutesEveryKeyToItsBucket: a key is written to, read from and
// updated in the bucket its route names and no other; GetMany reads keys of every bucket;
// List of a pattern naming one partition reads that bucket, of a wildcard every bucket.
func TestPartitionedStoreRoutesEveryKeyToItsBucket(t *testing.T) {
	js, ctx := startJetStream(t)
	var kvs []jetstream.KeyValue
	for k := range 3 {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fmt.Sprintf("part_%d", k), History: 1})
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, kv)
	}
	// Keys are "{partition}.{name}"; a wildcard first token spans every partition.
	route := func(key string) int {
		first, _, _ := strings.Cut(key, ".")
		switch first {
		case "0", "1", "2":
			return int(first[0] - '0')
		}
		return -1
	}
	s := state.NewPartitionedStore[counter](kvs, route, state.WithJetStream(js))
	for k := range 3 {
		for _, name := range []string{"a", "b"} {
			key := fmt.Sprintf("%d.%s", k, name)
			if _, _, err := s.Update(ctx, key, func(c *counter, _ bool) error { c.N = k + 1; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, kv := range kvs {
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for key := range keys.Keys() {
			got = append(got, key)
		}
		if len(got) != 2 || !strings.HasPrefix(got[0], fmt.Sprint(k)+".") || !strings.HasPrefix(got[1], fmt.Sprint(k)+".") {
			t.Errorf("bucket %d holds %v, want its two keys", k, got)
		}
	}
	many, err := s.GetMany(ctx, []string{"0.a", "1.b", "2.a", "2.zz"})
	if err != nil || len(many) != 3 || many["1.b"].Value.N != 2 || many["2.a"].Value.N != 3 {
		t.Fatalf("GetMany = %v, %v", many, err)
	}
	if one, err := s.List(ctx, "1.*"); err != nil || len(one) != 2 || one["1.a"].Value.N != 2 {
		t.Fatalf("List(1.*) = %v, %v", one, err)
	}
	if all, err := s.List(ctx, "*.a"); err != nil || len(all) != 3 {
		t.Fatalf("List(*.a) = %v, %v; want one key of each bucket", all, err)
	}
	if v, _, err := s.GetFromLeader(ctx, "2.b"); err != nil || v.N != 3 {
		t.Fatalf("GetFromLeader(2.b) = %v, %v", v, err)
	}
}
