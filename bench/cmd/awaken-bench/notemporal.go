//go:build !temporal

package main

import (
	"context"
	"errors"
)

// newTemporal is unavailable in the binary that runs the awaken rows: Temporal's packages
// would inflate those rows' peak RSS (their init alone maps tens of MiB). The parent runs
// the Temporal rows with the binary built with -tags temporal (-temporal-bin).
func newTemporal(context.Context, bool, level, bool) (target, error) {
	return nil, errors.New("this binary was built without -tags temporal")
}

func temporalTuning(level, bool) []string { return nil }
