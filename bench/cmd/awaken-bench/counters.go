package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// serverRow is a row on embedded NATS servers (one, or the nodes of a cluster) whose own
// counters can be read.
type serverRow interface{ servers() []*server.Server }

// jsCounters are the servers' totals: messages ever stored per stream (the last sequence
// of each: every publish and every KV put, create or update is one stored message, and
// with sync always one fsync on each node holding a replica), and JetStream API requests
// answered.
type jsCounters struct {
	stored map[string]uint64
	api    uint64
}

// readCounters reads the counters of every node. Every node of the cluster rows holds a
// replica of every stream (R3 on three nodes), so a stream's count is the highest last
// sequence a node has applied (a replica may not have applied the latest yet), not their
// sum; the API requests are summed, as each node counts those it answered.
func readCounters(srvs []*server.Server) (jsCounters, error) {
	c := jsCounters{stored: map[string]uint64{}}
	for _, srv := range srvs {
		info, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
		if err != nil {
			return jsCounters{}, err
		}
		c.api += info.API.Total
		last := map[string]uint64{}
		for _, a := range info.AccountDetails {
			for _, s := range a.Streams {
				last[s.Name] += s.State.LastSeq
			}
		}
		for name, v := range last {
			c.stored[name] = max(c.stored[name], v)
		}
	}
	return c, nil
}

// writeCount is what one call cost the server on one path, from its own counters.
type writeCount struct {
	Path    string `json:"path"`
	Batches int    `json:"batches"`
	Calls   int    `json:"calls"`
	// StoredPerCall is the stored messages (durable writes) per call, all streams.
	StoredPerCall float64 `json:"stored_messages_per_call"`
	// APIPerCall is the JetStream API requests per call (stream and consumer management,
	// direct gets, batch gets; not publishes, acks or pull requests).
	APIPerCall float64            `json:"js_api_requests_per_call"`
	ByStream   map[string]float64 `json:"stored_per_call_by_stream"`
}

// countWrites runs batches batches of n calls through run (one at a time) and reads the
// server's counters before and after.
func countWrites(ctx context.Context, srv []*server.Server, path string, batches, n int,
	run func(ctx context.Context, runID string, step int64, n int) ([]string, error)) (writeCount, error) {
	// Let the previous phase's trailing work (the publisher's last CAS, acks) settle.
	time.Sleep(200 * time.Millisecond)
	before, err := readCounters(srv)
	if err != nil {
		return writeCount{}, err
	}
	runID := "count-" + strings.NewReplacer(" ", "-").Replace(path)
	for i := range batches {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := run(cctx, runID, int64(i+1), n)
		cancel()
		if err != nil {
			return writeCount{}, fmt.Errorf("count %s: %w", path, err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	after, err := readCounters(srv)
	if err != nil {
		return writeCount{}, err
	}
	calls := float64(batches * n)
	wc := writeCount{Path: path, Batches: batches, Calls: batches * n, ByStream: map[string]float64{},
		APIPerCall: float64(after.api-before.api) / calls}
	for name, v := range after.stored {
		if d := v - before.stored[name]; d > 0 {
			wc.ByStream[name] = float64(d) / calls
			wc.StoredPerCall += float64(d) / calls
		}
	}
	return wc, nil
}

// streamsByCost lists a write count's streams, most writes first.
func streamsByCost(wc writeCount) []string {
	names := make([]string, 0, len(wc.ByStream))
	for n := range wc.ByStream {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if wc.ByStream[a] != wc.ByStream[b] {
			if wc.ByStream[a] > wc.ByStream[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})
	return names
}
