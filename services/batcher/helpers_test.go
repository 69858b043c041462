package batcher_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/batcher"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = servicetest.WaitTimeout

// service is the batcher as its tests run it: a fast redelivery, at most ten deliveries.
var service = servicetest.Service[*batcher.Service, bus.DeliveryOption]{
	Name: batcher.ServiceName, Start: batcher.Start,
	Defaults: []bus.DeliveryOption{bus.WithDelivery(10, 20*time.Millisecond)},
}

// harness is the shared service harness running the batcher.
type harness struct {
	*servicetest.Harness[*batcher.Service, bus.DeliveryOption]
}

// stored is one message read back from a stream.
type stored = servicetest.Stored

var (
	errInjected = servicetest.ErrInjected
	call        = servicetest.Call
	submission  = servicetest.Submission
	op          = contracts.OperationID
)

// newHarness starts a server and one batcher on it.
func newHarness(t *testing.T) *harness { return &harness{servicetest.Start(t, service)} }

// in returns a view of h that reports failures to t (a subtest).
func (h *harness) in(t *testing.T) *harness { return &harness{h.Harness.In(t)} }

// recorded returns the revisions of run's record that record a batch: the gate's work.
func (h *harness) recorded(run string) []stored {
	return servicetest.BatchesRecorded(h.T, h.Ctx, h.JS, h.Env.Names, run)
}

// waitRecorded waits until run's record has recorded n batches and returns the revisions.
func (h *harness) waitRecorded(run string, n int) []stored {
	h.T.Helper()
	var got []stored
	natstest.WaitFor(h.T, waitTimeout, func() bool {
		got = h.recorded(run)
		return len(got) >= n
	}, fmt.Sprintf("%d batches recorded for run %s", n, run))
	return got
}

// rejections returns the rejection events published so far.
func (h *harness) rejections() []stored {
	return h.Messages(h.Env.Names.SubmissionsStream(), h.Env.Names.RejectedSubject())
}

// decode unmarshals the data of an event into a T.
func decode[T any](t *testing.T, ev cloudevent.Event) T {
	t.Helper()
	return servicetest.Decode[T](t, ev)
}
