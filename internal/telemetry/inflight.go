package telemetry

import (
	"sort"
	"sync"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
)

// Work is one message a service is handling right now: what a graceful stop waits for.
type Work struct {
	Service  string
	Consumer string
	EventID  string
	Subject  string
	// RunID, BatchID and CallID are read from the event's data ("" when it has none).
	RunID, BatchID, CallID string
	Since                  time.Time
}

// inflightSet holds the deliveries between Begin and their settlement. The event data
// is kept by reference and decoded only when [Telemetry.InFlight] is asked, so the hot
// path pays a map insert and delete, not a JSON pass.
type inflightSet struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]inflightEntry
}

type inflightEntry struct {
	consumer, eventID, subject string
	// ceSubject is the event's subject attribute: the batch id on a call-record revision
	// (whose data, the record, names the call but not its batch).
	ceSubject string
	data      []byte
	since     time.Time
}

func (s *inflightSet) add(d bus.Delivery) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[uint64]inflightEntry)
	}
	s.next++
	s.m[s.next] = inflightEntry{consumer: d.Consumer, eventID: d.Event.ID, subject: d.Subject, ceSubject: d.Event.Subject,
		data: d.Event.Data, since: time.Now()}
	return s.next
}

func (s *inflightSet) remove(id uint64) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// InFlight returns the messages the service's consume loops are handling now, oldest
// first.
func (t *Telemetry) InFlight() []Work {
	if t == nil {
		return nil
	}
	t.work.mu.Lock()
	entries := make([]inflightEntry, 0, len(t.work.m))
	for _, e := range t.work.m {
		entries = append(entries, e)
	}
	t.work.mu.Unlock()
	out := make([]Work, 0, len(entries))
	for _, e := range entries {
		w := Work{Service: t.service, Consumer: e.consumer, EventID: e.eventID, Subject: e.subject, Since: e.since}
		if ref, ok := refOf(e.data, e.ceSubject); ok {
			w.RunID, w.BatchID, w.CallID = ref.RunID, ref.BatchID, ref.CallID
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}
