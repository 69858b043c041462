package main

import (
	"fmt"
	"hash/fnv"

	"github.com/awaken-dev/awaken/internal/config"
)

// partitionOf is the partition, of parts, that holds run's records in the floor: a
// stable hash of the run id.
func partitionOf(run string, parts int) int {
	if parts <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(run))
	return int(h.Sum32() % uint32(parts))
}

// setPartitions sets the pipeline's partitions (storage.partitions).
func setPartitions(cfg *config.Config, n int) error {
	if n > 1 {
		return fmt.Errorf("storage.partitions %d: this awaken has no partitions", n)
	}
	_ = cfg
	return nil
}
