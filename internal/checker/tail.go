package checker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Tail reads, while a run goes on, every stream the checker needs, from its first message:
// with a short retention (the chaos runs expire the records of finished runs and the
// streams' messages many times over) a message may be gone by the time the pipeline is
// quiescent, and a message read before it expired still counts. A message that expired
// before the tail read it is not guessed at: [Tail.Snapshot] fails, naming the stream and
// the sequences it missed, rather than report a lost batch or a missing approval that
// retention, not the pipeline, took away.
//
// It also counts the evidence that records did expire during the run: the expiry markers
// the server leaves in the batch archive (each one drives the gate's sweep of the batch's
// call and ticket records) and in the runs bucket, and, per stream, the messages aged out.
type Tail struct {
	js      jetstream.JetStream
	names   contracts.Names
	kept    []*tailed // results, audit, tickets: every message kept for the check
	markers []*tailed // batch archive and runs bucket: only expiry markers counted
	// archives are the record streams of every partition's batch archive.
	archives []string
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// tailed is one stream the tail follows.
type tailed struct {
	name string
	keep bool // keep every message (else count expiry markers only)

	mu      sync.Mutex
	last    uint64 // highest stream sequence read
	msgs    []Message
	markers int                 // expiry markers read
	expired map[string]struct{} // subjects (keys) an expiry marker was read on
	missed  []string            // sequence ranges that expired before they were read
}

// tailHeartbeat bounds how long the tail's reader of a stream stays on a consumer that no
// longer delivers (its server restarted, its node cut off) before it is recreated: well
// under the shortest retention a chaos run sets.
const tailHeartbeat = 500 * time.Millisecond

// Follow starts a tail of the results, audit and tickets streams and of the batch archive's
// and the runs bucket's streams of names. Streams that do not exist yet are waited for.
// Call it before the first submission; [Tail.Stop] ends it.
func Follow(ctx context.Context, js jetstream.JetStream, names contracts.Names) *Tail {
	ctx, cancel := context.WithCancel(ctx)
	// Every partition's streams: the deployment's partition count when it is set up
	// already, else names'.
	if n, err := bus.DeploymentNames(ctx, js, names); err == nil {
		names = n
	}
	t := &Tail{js: js, names: names, stop: cancel}
	kept := []string{names.TicketsStream()}
	var markers []string
	for _, pn := range names.EachPartition() {
		kept = append(kept, pn.ResultsStream(), pn.AuditStream())
		markers = append(markers, contracts.RecordStream(pn.BatchesBucket()), contracts.RecordStream(pn.RunsBucket()))
		t.archives = append(t.archives, contracts.RecordStream(pn.BatchesBucket()))
	}
	for _, name := range kept {
		t.kept = append(t.kept, &tailed{name: name, keep: true})
	}
	for _, name := range markers {
		t.markers = append(t.markers, &tailed{name: name})
	}
	for _, s := range slices.Concat(t.kept, t.markers) {
		t.done.Go(func() { t.follow(ctx, s) })
	}
	return t
}

// Stop ends the tail and waits for its readers.
func (t *Tail) Stop() {
	t.stop()
	t.done.Wait()
}

// follow reads s from its first message until ctx ends, recreating its ordered consumer
// whenever it fails (a missing stream, a server restart, a leader moved).
func (t *Tail) follow(ctx context.Context, s *tailed) {
	for ctx.Err() == nil {
		if err := t.read(ctx, s); err != nil && ctx.Err() == nil {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
}

func (t *Tail) read(ctx context.Context, s *tailed) error {
	s.mu.Lock()
	start := s.last + 1
	s.mu.Unlock()
	cons, err := t.js.OrderedConsumer(ctx, s.name, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start})
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullExpiry(2*tailHeartbeat+time.Second), jetstream.PullHeartbeat(tailHeartbeat))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			return err
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		s.add(m, md)
	}
}

// add records one delivered message. A sequence past the next one expected means the
// messages between were gone when the consumer reached them: for a kept stream, whose
// messages leave only by age, they expired unread.
func (s *tailed) add(m jetstream.Msg, md *jetstream.MsgMetadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := md.Sequence.Stream
	if seq <= s.last {
		return // a consumer recreated after this message was read
	}
	if s.keep && seq > s.last+1 {
		s.missed = append(s.missed, fmt.Sprintf("%d-%d", s.last+1, seq-1))
	}
	s.last = seq
	if !s.keep {
		if m.Headers().Get(jetstream.MarkerReasonHeader) == "MaxAge" {
			s.markers++
			if s.expired == nil {
				s.expired = map[string]struct{}{}
			}
			s.expired[m.Subject()] = struct{}{}
		}
		return
	}
	msg := Message{Seq: seq, Stream: s.name, Time: md.Timestamp, Subject: m.Subject()}
	if ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data()); err == nil {
		msg.Type, msg.Data = ev.Type, ev.Data
	} else {
		msg.Type, msg.Data = "undecodable: "+err.Error(), m.Data()
	}
	s.msgs = append(s.msgs, msg)
}

// ErrMissed is wrapped by [Tail.Snapshot] when a message of a stream the checker reads
// expired before the tail read it: the check cannot be made (the retention is shorter than
// the tail's lag), which is not a verdict on the pipeline.
var ErrMissed = errors.New("checker: messages expired before the tail read them")

// Snapshot waits until the tail has read every stream up to its last sequence at the time
// of the call and returns what it read, with the body-run ledger. Call it once the
// pipeline is quiescent.
func (t *Tail) Snapshot(ctx context.Context) (*Observed, error) {
	for _, s := range t.kept {
		last, err := t.lastSeq(ctx, s.name)
		if err != nil {
			return nil, err
		}
		for {
			s.mu.Lock()
			read, missed := s.last, slices.Clone(s.missed)
			s.mu.Unlock()
			if len(missed) > 0 {
				return nil, fmt.Errorf("%w: %s sequences %s", ErrMissed, s.name, strings.Join(missed, ", "))
			}
			if read >= last {
				break
			}
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return nil, fmt.Errorf("checker: tail of %s read up to %d, want %d: %w", s.name, read, last, ctx.Err())
			}
		}
	}
	o := &Observed{}
	for _, s := range t.kept {
		s.mu.Lock()
		msgs := slices.Clone(s.msgs)
		s.mu.Unlock()
		switch {
		case s.name == t.names.TicketsStream():
			o.Tickets = msgs
		case strings.HasPrefix(s.name, t.names.ResultsStream()):
			o.Results = append(o.Results, msgs...)
		case strings.HasPrefix(s.name, t.names.AuditStream()):
			o.Audit = append(o.Audit, msgs...)
		}
	}
	var err error
	if o.Ledger, err = readLedger(ctx, t.js, t.names); err != nil {
		return nil, err
	}
	return o, nil
}

// lastSeq is the last sequence of a stream, asked until the server answers or ctx ends
// (a server that just restarted may not answer at once).
func (t *Tail) lastSeq(ctx context.Context, name string) (uint64, error) {
	for {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := t.js.Stream(ictx, name)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ictx)
		}
		cancel()
		if err == nil {
			return info.State.LastSeq, nil
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return 0, fmt.Errorf("checker: stream %s: %w (last error %w)", name, ctx.Err(), err)
		}
	}
}

// Expiry is the evidence that records and messages expired during a run.
type Expiry struct {
	// ArchivesExpired is how many batch archives the tail saw an expiry marker of: each
	// is a finished batch past the run retention whose call and ticket records the gate's
	// sweeper then purges. RunRecordsExpired is the same for run records. Both count keys
	// and are lower bounds: a marker that came and went while the tail's reader was being
	// recreated is not counted.
	ArchivesExpired, RunRecordsExpired int
	// Markers is how many expiry markers the tail read in both: more than the keys when a
	// key expired more than once — a new record under it, or a record the server expired
	// again after a hard kill (SIGKILL) made it forget the first expiry.
	Markers int
	// AgedOut is, by stream, how many messages its retention removed (its first sequence
	// less one: these streams are trimmed by age only).
	AgedOut map[string]uint64
}

// Expiries reads the expiry evidence: the markers the tail counted and each stream's
// first sequence now.
func (t *Tail) Expiries(ctx context.Context) (Expiry, error) {
	e := Expiry{AgedOut: map[string]uint64{}}
	for _, s := range t.markers {
		s.mu.Lock()
		n := len(s.expired)
		e.Markers += s.markers
		s.mu.Unlock()
		if slices.Contains(t.archives, s.name) {
			e.ArchivesExpired += n
		} else {
			e.RunRecordsExpired += n
		}
	}
	for _, name := range expiryStreams(t.names) {
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := t.js.Stream(ictx, name)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ictx)
		}
		cancel()
		if err != nil {
			return e, fmt.Errorf("checker: stream %s: %w", name, err)
		}
		if info.State.FirstSeq > 0 {
			e.AgedOut[name] = info.State.FirstSeq - 1
		}
	}
	return e, nil
}

// expiryStreams are the streams whose aged-out messages the expiry evidence counts: the
// unpartitioned ones, then every partition's results stream.
func expiryStreams(n contracts.Names) []string {
	return append(unpartitionedExpiryStreams(n), resultsStreams(n)...)
}

func unpartitionedExpiryStreams(n contracts.Names) []string {
	return []string{n.SubmissionsStream(), n.ControlStream(), n.TicketsStream(), n.EventsStream()}
}

// resultsStreams is the results stream of every partition, partition 0 first.
func resultsStreams(n contracts.Names) []string {
	var out []string
	for _, pn := range n.EachPartition() {
		out = append(out, pn.ResultsStream())
	}
	return out
}

// Summary is the one-line evidence printed by the chaos runs and the crash matrix. The
// results figure sums every partition's results stream; with several partitions each
// one's follows (results=12 (p0=5,p1=7)).
func (e Expiry) Summary(n contracts.Names) string {
	var b strings.Builder
	fmt.Fprintf(&b, "expiry: batch_archives_expired=%d run_records_expired=%d markers=%d aged_out:", e.ArchivesExpired, e.RunRecordsExpired, e.Markers)
	for _, name := range unpartitionedExpiryStreams(n) {
		fmt.Fprintf(&b, " %s=%d", strings.ToLower(name[strings.LastIndexByte(name, '_')+1:]), e.AgedOut[name])
	}
	var total uint64
	var each []string
	for k, name := range resultsStreams(n) {
		total += e.AgedOut[name]
		each = append(each, fmt.Sprintf("p%d=%d", k, e.AgedOut[name]))
	}
	fmt.Fprintf(&b, " results=%d", total)
	if len(each) > 1 {
		fmt.Fprintf(&b, " (%s)", strings.Join(each, ","))
	}
	return b.String()
}

// Add sums two runs' evidence (the crash matrix prints one line for all its cells).
func (e Expiry) Add(o Expiry) Expiry {
	sum := Expiry{ArchivesExpired: e.ArchivesExpired + o.ArchivesExpired, RunRecordsExpired: e.RunRecordsExpired + o.RunRecordsExpired,
		Markers: e.Markers + o.Markers, AgedOut: map[string]uint64{}}
	for _, m := range []map[string]uint64{e.AgedOut, o.AgedOut} {
		for k, v := range m {
			sum.AgedOut[k] += v
		}
	}
	return sum
}
