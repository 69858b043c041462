package servicetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/awaken-dev/awaken/internal/pipeline"
)

// faults is the state of the fault hook, shared by every view of a Kit.
type faults struct {
	mu       sync.Mutex
	rules    []faultRule
	hits     map[string]int // "point|op" → number of times the hook was reached
	injected int            // number of faults the hook injected, at every point
}

// faultRule makes the hook fail at point for op, times times (forever when < 0), running
// before (if set) first. A rule with a pass function runs it on every hit instead and
// never fails.
type faultRule struct {
	point  pipeline.FaultPoint
	op     string
	times  int
	before func()
	pass   func(hit int)
}

// FailAt makes the fault hook fail at point for op times times (forever when < 0),
// running before, if not nil, each time before it fails.
func (k *Kit) FailAt(point pipeline.FaultPoint, op string, times int, before func()) {
	k.faults.mu.Lock()
	defer k.faults.mu.Unlock()
	k.faults.rules = append(k.faults.rules, faultRule{point: point, op: op, times: times, before: before})
}

// OnFault runs fn with the hit number (1, 2, ...) every time the fault hook is reached at
// point for op, without failing; tests use it to hold a handler at a step boundary.
func (k *Kit) OnFault(point pipeline.FaultPoint, op string, fn func(hit int)) {
	k.faults.mu.Lock()
	defer k.faults.mu.Unlock()
	k.faults.rules = append(k.faults.rules, faultRule{point: point, op: op, pass: fn})
}

// HitCount is how often the fault hook was reached at point for op.
func (k *Kit) HitCount(point pipeline.FaultPoint, op string) int {
	k.faults.mu.Lock()
	defer k.faults.mu.Unlock()
	return k.faults.hits[string(point)+"|"+op]
}

// Injected is how many faults the hook has injected so far, at every point.
func (k *Kit) Injected() int {
	k.faults.mu.Lock()
	defer k.faults.mu.Unlock()
	return k.faults.injected
}

func (k *Kit) fault(_ context.Context, service string, point pipeline.FaultPoint, op string) error {
	if service != k.service {
		k.T.Errorf("fault hook called with service %q, want %q", service, k.service)
	}
	k.faults.mu.Lock()
	k.faults.hits[string(point)+"|"+op]++
	hit := k.faults.hits[string(point)+"|"+op]
	var before func()
	fail := false
	for i := range k.faults.rules {
		f := &k.faults.rules[i]
		if f.point == point && f.op == op && f.pass != nil {
			pass := f.pass
			k.faults.mu.Unlock()
			pass(hit)
			return nil
		}
		if f.point == point && f.op == op && f.times != 0 {
			f.times--
			k.faults.injected++
			before, fail = f.before, true
			break
		}
	}
	k.faults.mu.Unlock()
	if !fail {
		return nil
	}
	if before != nil {
		before()
	}
	return fmt.Errorf("%w at %s of %s", ErrInjected, point, op)
}

// clock is the environment's clock in a Kit: real time shifted by an offset the test may
// advance (a timer that is due in an hour becomes due now).
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time { return time.Now().UTC().Add(time.Duration(c.offset.Load())) }

// Advance moves the environment's clock d ahead.
func (k *Kit) Advance(d time.Duration) { k.clock.offset.Add(int64(d)) }
