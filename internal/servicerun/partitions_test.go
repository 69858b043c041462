package servicerun_test

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/servicerun"
)

// TestSetupCreatesEveryPartitionAndRecordsP: at P=4 setup creates four of each
// partitioned store and records P; a setup or a service configured for another P is
// refused with the typed error, and a deployment set up at P=1 refuses P=4 too.
func TestSetupCreatesEveryPartitionAndRecordsP(t *testing.T) {
	js, ctx := startServer(t)
	log := zerolog.Nop()

	cfg := &config.Config{Prefix: "four", Storage: config.Storage{Partitions: 4}}
	if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
		t.Fatal(err)
	}
	for _, pn := range cfg.Names().EachPartition() {
		for _, stream := range []string{pn.ResultsStream(), pn.AuditStream(), pn.CallRecordsStream(), pn.RunRecordsStream(), "KV_" + pn.BatchesBucket()} {
			if _, err := js.Stream(ctx, stream); err != nil {
				t.Errorf("partition %d: stream %s: %v", pn.PartitionIndex(), stream, err)
			}
		}
	}
	if p, found, err := servicerun.RecordedPartitions(ctx, js, cfg.Names()); err != nil || !found || p != 4 {
		t.Fatalf("recorded = %d, %v, %v; want 4", p, found, err)
	}
	if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
		t.Fatalf("second setup at the same P: %v", err)
	}

	other := &config.Config{Prefix: "four", Storage: config.Storage{Partitions: 2}}
	var mismatch *servicerun.PartitionsMismatchError
	if err := servicerun.Setup(ctx, js, other, log); !errors.As(err, &mismatch) || mismatch.Recorded != 4 || mismatch.Configured != 2 {
		t.Fatalf("setup at P=2 over P=4: %v, want a PartitionsMismatchError", err)
	}
	if err := servicerun.CheckPartitions(ctx, js, other.Names()); !errors.Is(err, servicerun.ErrPartitionsMismatch) {
		t.Fatalf("service at P=2 over P=4: %v", err)
	}

	one := &config.Config{Prefix: "one"}
	if err := servicerun.Setup(ctx, js, one, log); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, "ONE_RESULTS_P1"); err == nil {
		t.Fatal("P=1 created a second results stream")
	}
	four := &config.Config{Prefix: "one", Storage: config.Storage{Partitions: 4}}
	if err := servicerun.Setup(ctx, js, four, log); !errors.Is(err, servicerun.ErrPartitionsMismatch) {
		t.Fatalf("setup at P=4 over P=1: %v, want refused", err)
	}
	if _, err := js.Stream(ctx, "ONE_RESULTS_P1"); err == nil {
		t.Fatal("the refused setup created partition 1")
	}
}
