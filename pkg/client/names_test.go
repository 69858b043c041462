package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestNamesAreTheDeployments: Names carries the partition count setup recorded, which the
// client was never told, so its per-run names are the run's partition's.
func TestNamesAreTheDeployments(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Conn(t)
	ctx := servicetest.Context(t, 30*time.Second)
	deployed := contracts.NewNames("")
	deployed.Partitions = 2
	if err := bus.EnsureTopology(ctx, js, deployed, bus.TopologyConfig{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	cnc, _ := srv.Conn(t)
	c, err := New(cnc)
	if err != nil {
		t.Fatal(err)
	}
	run := ""
	for i := 0; run == ""; i++ {
		if r := fmt.Sprintf("names-%d", i); deployed.PartitionOf(r) == 1 {
			run = r
		}
	}
	names, err := c.Names(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names.PartitionCount() != 2 || names.ResultsSubject(run) != deployed.ResultsSubject(run) {
		t.Fatalf("Names: %d partitions, results of %s on %q; want 2 and %q",
			names.PartitionCount(), run, names.ResultsSubject(run), deployed.ResultsSubject(run))
	}
}
