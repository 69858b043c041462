package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The soak's configuration is the example's with its relative module paths made absolute
// (the copy lives in a temporary directory), a per-run limit in its policy (a policy
// section made when the example has none) and the retention section added; an example
// with a retention or limits section of its own is refused rather than given two.
func TestSoakConfig(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join(dir, "examples", "awaken.yaml")
	if err := os.MkdirAll(filepath.Dir(example), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := "tools:\n  - id: wc\n    module: ../bin/wasm/wc.wasm\n  - id: abs\n    module: /opt/x.wasm\n"
	for _, tc := range []struct{ name, example, policy string }{
		{"with a policy", tools + "policy:\n  default_behavior: allow\n", "policy:\n  limits:\n" + soakLimit + "  default_behavior: allow\n"},
		{"without one", tools, "\npolicy:\n  limits:\n" + soakLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(example, []byte(tc.example), 0o644); err != nil {
				t.Fatal(err)
			}
			path, err := soakConfig(example, t.TempDir(), "2m0s")
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"module: " + filepath.Join(dir, "bin/wasm/wc.wasm") + "\n", "module: /opt/x.wasm\n",
				tc.policy, "retention:\n  default: 2m0s\n"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("soak configuration lacks %q:\n%s", want, b)
				}
			}
		})
	}
	for _, refused := range []string{"retention:\n  default: 1h\n", "policy:\n  limits: []\n", "policy: { default_behavior: allow }\n"} {
		if err := os.WriteFile(example, []byte(refused), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := soakConfig(example, t.TempDir(), "2m0s"); err == nil {
			t.Errorf("example %q was accepted", refused)
		}
	}
}

// A limits ledger key names its run in its encoded key value: a run-keyed limit's is the
// run id, a step-keyed limit's {run id}/{step}; a record key has the run id as a token.
func TestRunsOfKey(t *testing.T) {
	for _, tc := range []struct {
		limits    bool
		key, want string
	}{
		{true, contracts.LimitLedgerKey("soak-per-run", "soak-1-7", time.Time{}), "soak-1-7"},
		{true, contracts.LimitLedgerKey("per-step", "soak-1-7/1", time.Unix(3600, 0)), "soak-1-7"},
		{false, "brain.soak-1-7.1.c1", "soak-1-7"},
	} {
		if got := runsOfKey(tc.limits, tc.key); !slices.Contains(got, tc.want) {
			t.Errorf("runsOfKey(%v, %s) = %v, want %s among them", tc.limits, tc.key, got, tc.want)
		}
	}
	if got := runsOfKey(true, "not-a-ledger-key"); len(got) != 0 {
		t.Errorf("runsOfKey of a malformed ledger key = %v, want none", got)
	}
}

// A store plateaus when its size at the end is within 1.2× of the 50% mark, or grew by
// less than one block allocation's slack; the 50% mark is the first sample with half the
// calls done.
func TestSummarizePlateau(t *testing.T) {
	at := func(calls, grows, level, tiny int64) sample {
		return sample{Calls: calls, Stores: map[string]store{"grows": {Bytes: grows}, "level": {Bytes: level}, "tiny": {Bytes: tiny}}}
	}
	sum := &summary{Stores: map[string]storeSummary{}, Samples: []sample{
		at(100, 10<<20, 50<<20, 8192), at(500, 20<<20, 55<<20, 8192), at(1000, 30<<20, 56<<20, 16384),
	}}
	summarize(sum)
	for name, want := range map[string]bool{"grows": false, "level": true, "tiny": true} {
		if got := sum.Stores[name].Plateaued; got != want {
			t.Errorf("%s: plateaued %v, want %v (%+v)", name, got, want, sum.Stores[name])
		}
	}
	if got := sum.Stores["grows"].BytesMid; got != 20<<20 {
		t.Errorf("50%% mark of grows: %d bytes, want the sample at 500 calls (%d)", got, 20<<20)
	}
}

// The soak samples every partition's buckets: the keys of a partitioned bucket are summed
// over the partitions, and the stale keys of a run of partition 1 are found in its
// partition's bucket.
func TestSamplesEveryPartition(t *testing.T) {
	names := contracts.NewNames("")
	names.Partitions = 2
	keys := recordKeys(map[string]store{"KV_AWAKEN_calls": {Keys: 3}, "KV_AWAKEN_calls_p1": {Keys: 4}}, names)
	if got := keys["calls"]; got.Keys != 7 || !slices.Equal(got.PerPartition, []uint64{3, 4}) {
		t.Errorf("calls keys %+v, want 7 = 3 + 4", got)
	}

	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var buckets []string
	for _, pn := range names.EachPartition() {
		buckets = append(buckets, pn.CallsBucket(), pn.RunsBucket(), pn.BatchesBucket())
	}
	for _, b := range append(buckets, names.TicketsBucket(), names.LimitsBucket()) {
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b}); err != nil {
			t.Fatal(err)
		}
	}
	run := ""
	for i := 0; run == ""; i++ {
		if r := "soak-" + strconv.Itoa(i); names.PartitionOf(r) == 1 {
			run = r
		}
	}
	kv, err := js.KeyValue(ctx, names.Of(run).CallsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "brain."+run+".1.c1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	stale, err := staleKeys(ctx, js, names, map[string]time.Time{run: time.Now().Add(-time.Hour)}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := stale["KV_AWAKEN_calls_p1"]; got != 1 {
		t.Errorf("stale keys %v, want the one of %s in KV_AWAKEN_calls_p1", stale, run)
	}
}
