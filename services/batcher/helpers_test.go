package batcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/batcher"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = servicetest.WaitTimeout

// service is the batcher as its tests run it: a fast redelivery, at most ten deliveries.
var service = servicetest.Service[*batcher.Service, bus.DeliveryOption]{
	Name: batcher.ServiceName, Start: func(ctx context.Context, env *pipeline.Env, opts ...bus.DeliveryOption) (*batcher.Service, error) {
		return batcher.Start(ctx, batcher.DepsOf(env), opts...)
	},
	Defaults: []bus.DeliveryOption{bus.WithDelivery(10, 20*time.Millisecond)},
}

// harness is the shared service harness running the batcher.
type harness struct {
	*servicetest.Harness[*batcher.Service, bus.DeliveryOption]
}

var (
	call       = servicetest.Call
	submission = servicetest.Submission
	op         = contracts.OperationID
)

// newHarness starts a server and one batcher on it.
func newHarness(t *testing.T) *harness { return &harness{servicetest.Start(t, service)} }

// in returns a view of h that reports failures to t (a subtest).
func (h *harness) in(t *testing.T) *harness { return &harness{h.Harness.In(t)} }

// submitSettled submits sub under the CloudEvent id and waits until the batcher has
// settled it (recorded, refused or dead-lettered).
func (h *harness) submitSettled(id string, sub contracts.BatchSubmission) {
	h.T.Helper()
	h.settled(h.Submit(id, sub))
}

// settled waits until the batcher has settled every submission up to seq.
func (h *harness) settled(seq uint64) {
	h.T.Helper()
	h.WaitSettled(h.Env.Names.SubmissionsStream(), contracts.ConsumerBatcherSubmit, seq)
}

// recorded returns the stored revisions of run's record that record a batch: the gate's
// work. The runs bucket keeps one revision per key, so it is the latest revision when that
// one recorded a batch; a later write (a finalization) replaces it: use wantRunUnchanged
// to show that nothing was recorded again.
func (h *harness) recorded(run string) []servicetest.Stored {
	return servicetest.BatchesRecorded(h.T, h.Ctx, h.JS, h.Env.Names, run)
}

// waitRecorded waits until run's record has recorded n batches and returns the revisions.
func (h *harness) waitRecorded(run string, n int) []servicetest.Stored {
	h.T.Helper()
	var got []servicetest.Stored
	natstest.WaitFor(h.T, waitTimeout, func() bool {
		got = h.recorded(run)
		return len(got) >= n
	}, fmt.Sprintf("%d batches recorded for run %s", n, run))
	return got
}

// wantRecorded fails the test unless run's record has recorded exactly n batches.
func (h *harness) wantRecorded(run string, n int) {
	h.T.Helper()
	if got := len(h.recorded(run)); got != n {
		h.T.Errorf("%d batches recorded for run %s, want %d", got, run, n)
	}
}

// runRevision returns the revision of run's record.
func (h *harness) runRevision(run string) uint64 {
	h.T.Helper()
	_, rev, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(run))
	if err != nil {
		h.T.Fatalf("run record %s: %v", run, err)
	}
	return rev
}

// wantRunUnchanged fails the test unless run's record is still at revision rev: nothing
// (no second recording of a batch) was written to it since.
func (h *harness) wantRunUnchanged(run string, rev uint64) {
	h.T.Helper()
	if got := h.runRevision(run); got != rev {
		h.T.Errorf("run record %s rewritten: revision %d → %d", run, rev, got)
	}
}

// rejections returns the batch rejections published so far, in stream order.
func (h *harness) rejections() []contracts.BatchRejected {
	h.T.Helper()
	var out []contracts.BatchRejected
	for _, m := range h.Messages(h.Env.Names.SubmissionsStream(), h.Env.Names.RejectedSubject()) {
		out = append(out, servicetest.Decode[contracts.BatchRejected](h.T, m.Event))
	}
	return out
}

// unchangedNotices subscribes to run's unchanged subject (core NATS, as a submitter does)
// and returns the notices that arrive there, in order.
func (h *harness) unchangedNotices(run string) <-chan cloudevent.Event {
	h.T.Helper()
	out := make(chan cloudevent.Event, 16)
	sub, err := h.NC.Subscribe(h.Env.Names.UnchangedSubject(run), func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil {
			h.T.Errorf("undecodable notice on %s: %v", m.Subject, err)
			return
		}
		out <- ev
	})
	if err != nil {
		h.T.Fatal(err)
	}
	h.T.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := h.NC.Flush(); err != nil {
		h.T.Fatal(err)
	}
	return out
}

// nextUnchanged returns the next notice of notices, failing the test when none arrives.
func (h *harness) nextUnchanged(notices <-chan cloudevent.Event) (cloudevent.Event, contracts.BatchUnchanged) {
	h.T.Helper()
	select {
	case ev := <-notices:
		return ev, servicetest.Decode[contracts.BatchUnchanged](h.T, ev)
	case <-time.After(waitTimeout):
		h.T.Fatal("no unchanged notice arrived")
		return cloudevent.Event{}, contracts.BatchUnchanged{}
	}
}
