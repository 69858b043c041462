package bus_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// seen is one observed delivery: its event id, delivery count and settlement.
type seen struct {
	id        string
	delivered uint64
	ob        bus.Observation
}

type testObserver struct {
	mu    sync.Mutex
	seen  []seen
	bound []string
}

func (o *testObserver) Begin(ctx context.Context, d bus.Delivery) (context.Context, func(bus.Observation)) {
	return ctx, func(ob bus.Observation) {
		o.mu.Lock()
		o.seen = append(o.seen, seen{d.Event.ID, d.NumDelivered, ob})
		o.mu.Unlock()
	}
}

func (o *testObserver) Bound(durable string, _ <-chan struct{}) {
	o.mu.Lock()
	o.bound = append(o.bound, durable)
	o.mu.Unlock()
}

func (o *testObserver) of(id string) []seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []seen
	for _, s := range o.seen {
		if s.id == id {
			out = append(out, s)
		}
	}
	return out
}

// TestObserverSeesEverySettlement checks that the observer hears, once per delivery, how
// the loop settled it: ack, nak then ack on a retried delivery, dead letter with the
// rejection code, and dead letter without a handler run for a wrong event type.
func TestObserverSeesEverySettlement(t *testing.T) {
	h := newHarness(t)
	obs := &testObserver{}
	spec := h.spec("observed")
	spec.Observer = obs
	var once sync.Once
	h.consume(spec, func(ctx context.Context, d bus.Delivery) error {
		switch d.Event.ID {
		case "transient":
			var err error
			once.Do(func() { err = errors.New("flaky") })
			return err
		case "rejected":
			return contracts.Reject(contracts.RejectConflict, "no")
		}
		return nil
	})
	subject := testSubject(h.names, "run-1")
	for _, id := range []string{"ok", "transient", "rejected"} {
		h.publish(subject, h.event(id, 1))
	}
	wrong := h.event("wrong-type", 1)
	wrong.Type = contracts.TypeCallOutput
	h.publish(subject, wrong)

	rows := []struct {
		id      string
		want    []bus.Settlement
		code    contracts.RejectCode
		handled bool
	}{
		{"ok", []bus.Settlement{bus.SettledAck}, "", true},
		{"transient", []bus.Settlement{bus.SettledNak, bus.SettledAck}, "", true},
		{"rejected", []bus.Settlement{bus.SettledDeadLetter}, contracts.RejectConflict, true},
		{"wrong-type", []bus.Settlement{bus.SettledDeadLetter}, "wrong_type", false},
	}
	for _, r := range rows {
		t.Run(r.id, func(t *testing.T) {
			natstest.WaitFor(t, waitTimeout, func() bool { return len(obs.of(r.id)) >= len(r.want) }, "observations of "+r.id)
			got := obs.of(r.id)
			if len(got) != len(r.want) {
				t.Fatalf("observations %+v, want settlements %v", got, r.want)
			}
			for i, s := range got {
				if s.ob.Settlement != r.want[i] || s.delivered != uint64(i+1) || s.ob.Handled != r.handled {
					t.Errorf("observation %d = %+v (delivered %d), want %s, handled %v", i, s.ob, s.delivered, r.want[i], r.handled)
				}
			}
			if last := got[len(got)-1].ob; last.Code != r.code {
				t.Errorf("code = %q, want %q", last.Code, r.code)
			}
		})
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.bound) != 1 || obs.bound[0] != "observed" {
		t.Errorf("bound = %v, want [observed]", obs.bound)
	}
}
