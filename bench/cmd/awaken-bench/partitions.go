package main

import "github.com/awaken-dev/awaken/pkg/contracts"

// partitionOf is the partition, of parts, that holds run's records: the pipeline's
// (contracts.Names.PartitionOf, a stable hash of the run id), which the floor uses too, so
// that both place the same runs in the same partitions.
func partitionOf(run string, parts int) int {
	return contracts.Names{Partitions: parts}.PartitionOf(run)
}
