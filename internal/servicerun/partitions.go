package servicerun

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrPartitionsMismatch is matched (errors.Is) by a [*PartitionsMismatchError].
var ErrPartitionsMismatch = errors.New("the configured partition count is not the deployment's")

// PartitionsMismatchError is the refusal of a service, or of `awaken setup`, configured
// with another partition count than the one the deployment recorded: a run's records are
// found by the hash of its id modulo P, so two counts in one deployment would look for
// them in different partitions. Changing P is not done in place (docs/operations.md,
// "Partitions").
type PartitionsMismatchError struct {
	Configured, Recorded int
}

func (e *PartitionsMismatchError) Error() string {
	return fmt.Sprintf("storage.partitions is %d but the deployment was set up with %d partitions "+
		"(recorded in the submissions stream's metadata); configure %d, or see docs/operations.md, "+
		"\"Changing the partition count\"", e.Configured, e.Recorded, e.Recorded)
}

func (e *PartitionsMismatchError) Unwrap() error { return ErrPartitionsMismatch }

// RecordedPartitions returns the partition count the deployment of names recorded at
// setup, and whether it was set up at all ([bus.RecordedPartitions]).
func RecordedPartitions(ctx context.Context, js jetstream.JetStream, names contracts.Names) (int, bool, error) {
	return bus.RecordedPartitions(ctx, js, names)
}

// CheckPartitions refuses, with a [*PartitionsMismatchError], a configured partition
// count that differs from the one the deployment recorded; a deployment not set up yet
// accepts any.
func CheckPartitions(ctx context.Context, js jetstream.JetStream, names contracts.Names) error {
	recorded, found, err := RecordedPartitions(ctx, js, names)
	if err != nil || !found {
		return err
	}
	if recorded != names.PartitionCount() {
		return &PartitionsMismatchError{Configured: names.PartitionCount(), Recorded: recorded}
	}
	return nil
}
