package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// RecordedPartitions returns the partition count the deployment of names recorded at
// setup (the submissions stream's metadata, [contracts.PartitionsMetadataKey]), and
// whether the deployment is set up at all (its submissions stream exists).
func RecordedPartitions(ctx context.Context, js jetstream.JetStream, names contracts.Names) (int, bool, error) {
	st, err := js.Stream(ctx, names.SubmissionsStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("bus: read the recorded partition count: %w", err)
	}
	p, err := contracts.PartitionsOf(st.CachedInfo().Config.Metadata)
	if err != nil {
		return 0, false, fmt.Errorf("bus: stream %s: %w", names.SubmissionsStream(), err)
	}
	return p, true, nil
}

// DeploymentNames returns names with the partition count the deployment recorded, for
// the readers that are not told it (the CLI, the checker): a deployment not set up yet
// keeps names' own.
func DeploymentNames(ctx context.Context, js jetstream.JetStream, names contracts.Names) (contracts.Names, error) {
	p, found, err := RecordedPartitions(ctx, js, names)
	if err != nil {
		return names, err
	}
	if found {
		names.Partitions = p
	}
	return names, nil
}
