package main

import (
	"strings"
	"testing"
)

func TestParseRowLevels(t *testing.T) {
	for name, want := range map[string]rowSpec{
		"pipeline":               {kind: rowPipeline, level: levelSynced},
		"floor-relaxed":          {kind: rowFloor, level: levelRelaxed},
		"temporal-local-relaxed": {kind: rowTemporalLocal, level: levelRelaxed},
		"in-process":             {kind: rowInProcess, level: levelNone},
		"scaleout-4":             {kind: rowScaleOut, level: levelRelaxed, executors: 4},
	} {
		got, err := parseRow(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want.name = name
		if got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	for _, bad := range []string{"pipelines", "scaleout-0", "scaleout-x"} {
		if _, err := parseRow(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestRatiosStayWithinALevel: no ratio compares a synced row with a relaxed one.
func TestRatiosStayWithinALevel(t *testing.T) {
	rows := []result{
		{Row: "pipeline", Latency1: stats{MedianMs: 10}, Latency10: stats{MedianMs: 20}, CallsPerSec: 100},
		{Row: "temporal", Latency1: stats{MedianMs: 100}, Latency10: stats{MedianMs: 400}, CallsPerSec: 10},
		{Row: "pipeline-relaxed", Latency1: stats{MedianMs: 5}, Latency10: stats{MedianMs: 10}, CallsPerSec: 400},
		{Row: "temporal-relaxed", Latency1: stats{MedianMs: 20}, Latency10: stats{MedianMs: 200}, CallsPerSec: 40},
	}
	r := ratios(rows)
	for k, want := range map[string]float64{
		"temporal/pipeline latency_1 median":         10,
		"temporal/pipeline latency_1 median-relaxed": 4,
		"pipeline/temporal throughput":               10,
		"pipeline/temporal throughput-relaxed":       10,
	} {
		if r[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, r[k], want, r)
		}
	}
	for k := range r {
		if strings.Contains(k, "relaxed") != strings.HasSuffix(k, "-relaxed") {
			t.Errorf("ratio %q mixes levels", k)
		}
	}
}
