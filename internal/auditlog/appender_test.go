package auditlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

var names = contracts.NewNames("")

// trail is a real JetStream server with the awaken topology and a signing key.
type trail struct {
	t   testing.TB
	srv *natstest.Server
	js  jetstream.JetStream
	key ed25519.PrivateKey
	ctx context.Context
}

func newTrail(t testing.TB) *trail {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := bus.EnsureTopology(ctx, js, names, bus.TopologyConfig{}); err != nil {
		t.Fatal(err)
	}
	key, _, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return &trail{t: t, srv: srv, js: js, key: key, ctx: ctx}
}

// appender is a writer on its own connection, as a gate replica is.
func (tr *trail) appender() *auditlog.Appender {
	_, js := tr.srv.Conn(tr.t)
	return auditlog.New(js, names.AuditStream(), auditlog.SubjectPrefix(names), tr.key)
}

// record is audit record id on subject, as the gate encodes one.
func record(t testing.TB, subject, id string) *nats.Msg {
	t.Helper()
	ev, err := cloudevent.NewEvent(id, "awaken/gate", contracts.TypeAudit, contracts.AuditRecord{Decision: "allow", CallID: id})
	if err != nil {
		t.Fatal(err)
	}
	return cloudevent.EncodeMsg(subject, ev)
}

func (tr *trail) append(a *auditlog.Appender, subject, id string) *jetstream.PubAck {
	tr.t.Helper()
	ack, err := a.Append(tr.ctx, record(tr.t, subject, id))
	if err != nil {
		tr.t.Fatalf("append %s: %v", id, err)
	}
	return ack
}

func (tr *trail) read(subject string) []auditchain.Record {
	tr.t.Helper()
	recs, err := auditchain.Read(tr.ctx, tr.js, names.AuditStream(), auditchain.Query{Subject: subject})
	if err != nil {
		tr.t.Fatal(err)
	}
	return recs
}

func (tr *trail) verify(subject string) (*auditchain.Summary, error) {
	tr.t.Helper()
	return auditchain.Verify(tr.read(subject), auditchain.VerifyOptions{PublicKey: tr.key.Public().(ed25519.PublicKey), FromStart: true})
}

// mustBreak asserts that verify fails at the record with stream sequence seq for reason.
func mustBreak(t *testing.T, err error, seq uint64, reason auditchain.Reason) {
	t.Helper()
	var be *auditchain.BreakError
	if !errors.As(err, &be) {
		t.Fatalf("verify: %v, want a *BreakError", err)
	}
	if be.Seq != seq || be.Reason != reason {
		t.Fatalf("verify broke at seq %d (%s), want seq %d (%s): %v", be.Seq, be.Reason, seq, reason, err)
	}
}

// chainOf appends n records on a run's subject and returns the subject and their acks.
func (tr *trail) chainOf(run string, n int) (string, []*jetstream.PubAck) {
	a := tr.appender()
	subject := names.AuditSubject(run)
	var acks []*jetstream.PubAck
	for i := range n {
		acks = append(acks, tr.append(a, subject, fmt.Sprintf("%s-%d", run, i+1)))
	}
	return subject, acks
}

func TestAChainOfARunVerifies(t *testing.T) {
	tr := newTrail(t)
	subject, _ := tr.chainOf("run-a", 5)
	other, _ := tr.chainOf("run-b", 2) // another run's chain is its own
	sum, err := tr.verify(subject)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 5 || !sum.Signed || sum.Last[subject].N != 5 {
		t.Fatalf("summary %+v: want 5 signed records ending at n 5", sum)
	}
	if sum, err := tr.verify(other); err != nil || sum.Last[other].N != 2 {
		t.Fatalf("run-b: %+v %v", sum, err)
	}
	// The whole stream verifies as well: one chain per subject.
	all, err := auditchain.Read(tr.ctx, tr.js, names.AuditStream(), auditchain.Query{Subject: auditlog.SubjectPrefix(names) + ">"})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := auditchain.Verify(all, auditchain.VerifyOptions{PublicKey: tr.key.Public().(ed25519.PublicKey)}); err != nil || sum.Subjects != 2 {
		t.Fatalf("all: %+v %v", sum, err)
	}
}

// stored returns the message at seq as stored.
func (tr *trail) stored(seq uint64) *jetstream.RawStreamMsg {
	tr.t.Helper()
	s, err := tr.js.Stream(tr.ctx, names.AuditStream())
	if err != nil {
		tr.t.Fatal(err)
	}
	m, err := s.GetMsg(tr.ctx, seq)
	if err != nil {
		tr.t.Fatal(err)
	}
	return m
}

// forge deletes the record at seq and publishes m with an admin connection, with no
// compare-and-swap: what an operator with write access to the stream can do.
func (tr *trail) forge(deleteSeqs []uint64, msgs ...*nats.Msg) []uint64 {
	tr.t.Helper()
	s, err := tr.js.Stream(tr.ctx, names.AuditStream())
	if err != nil {
		tr.t.Fatal(err)
	}
	for _, seq := range deleteSeqs {
		if err := s.DeleteMsg(tr.ctx, seq); err != nil {
			tr.t.Fatal(err)
		}
	}
	var seqs []uint64
	for _, m := range msgs {
		ack, err := tr.js.PublishMsg(tr.ctx, m)
		if err != nil {
			tr.t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	return seqs
}

// copyOf is the stored message as a new message (same headers, chain headers included).
func copyOf(m *jetstream.RawStreamMsg) *nats.Msg {
	h := nats.Header{}
	for k, v := range m.Header {
		if k != "Nats-Msg-Id" && k != "Nats-Expected-Last-Subject-Sequence" {
			h[k] = append([]string(nil), v...)
		}
	}
	return &nats.Msg{Subject: m.Subject, Header: h, Data: append([]byte(nil), m.Data...)}
}

func TestATamperedTrailFailsVerificationNamingTheRecord(t *testing.T) {
	t.Run("untouched", func(t *testing.T) {
		tr := newTrail(t)
		subject, _ := tr.chainOf("run", 4)
		if _, err := tr.verify(subject); err != nil {
			t.Fatal(err)
		}
	})
	// Each tampering runs on a fresh chain of records appended on one run's subject and
	// returns the stream sequence verification must name.
	for _, tc := range []struct {
		name    string
		records int
		tamper  func(tr *trail, subject string, acks []*jetstream.PubAck) (breaksAt uint64)
		reason  auditchain.Reason
	}{
		{"edited data", 4, func(tr *trail, _ string, acks []*jetstream.PubAck) uint64 {
			last := acks[3].Sequence
			m := copyOf(tr.stored(last))
			m.Data = bytes.Replace(m.Data, []byte(`"allow"`), []byte(`"deny"`), 1)
			return tr.forge([]uint64{last}, m)[0]
		}, auditchain.BreakHash},
		{"re-sealed without the key", 4, func(tr *trail, _ string, acks []*jetstream.PubAck) uint64 {
			last := acks[3].Sequence
			m := copyOf(tr.stored(last))
			l, _ := auditchain.LinkOf(m.Header)
			m.Data = bytes.Replace(m.Data, []byte(`"allow"`), []byte(`"deny"`), 1)
			_, other, _ := ed25519.GenerateKey(nil)
			auditchain.Seal(m, l.N, l.Prev, other) // a consistent chain, signed by another key
			return tr.forge([]uint64{last}, m)[0]
		}, auditchain.BreakSignature},
		{"forged record without chain headers", 3, func(tr *trail, subject string, _ []*jetstream.PubAck) uint64 {
			return tr.forge(nil, record(tr.t, subject, "forged"))[0]
		}, auditchain.BreakUnchained},
		{"deleted record", 4, func(tr *trail, _ string, acks []*jetstream.PubAck) uint64 {
			tr.forge([]uint64{acks[1].Sequence})
			return acks[2].Sequence
		}, auditchain.BreakGap},
		{"deleted first record", 3, func(tr *trail, _ string, acks []*jetstream.PubAck) uint64 {
			tr.forge([]uint64{acks[0].Sequence})
			return acks[1].Sequence
		}, auditchain.BreakGap},
		{"reordered records", 4, func(tr *trail, _ string, acks []*jetstream.PubAck) uint64 {
			third, fourth := copyOf(tr.stored(acks[2].Sequence)), copyOf(tr.stored(acks[3].Sequence))
			return tr.forge([]uint64{acks[2].Sequence, acks[3].Sequence}, fourth, third)[0]
		}, auditchain.BreakGap},
		{"a writer appends after a forged record and the forgery stays named", 2, func(tr *trail, subject string, _ []*jetstream.PubAck) uint64 {
			forged := tr.forge(nil, record(tr.t, subject, "forged"))
			tr.append(tr.appender(), subject, "after") // a fresh writer: wrong guess, leader read, append
			return forged[0]
		}, auditchain.BreakUnchained},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTrail(t)
			subject, acks := tr.chainOf("run", tc.records)
			breaksAt := tc.tamper(tr, subject, acks)
			_, err := tr.verify(subject)
			mustBreak(t, err, breaksAt, tc.reason)
		})
	}
}

func TestTwoConcurrentWritersKeepOneChain(t *testing.T) {
	tr := newTrail(t)
	subject := names.AuditSubject("shared")
	writers := []*auditlog.Appender{tr.appender(), tr.appender()}
	const each = 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for w, a := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := a.Append(tr.ctx, record(t, subject, fmt.Sprintf("w%d-%d", w, i))); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sum, err := tr.verify(subject)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 2*each || sum.Last[subject].N != 2*each {
		t.Fatalf("summary %+v: want one chain of %d records", sum, 2*each)
	}
}

func TestARedeliveredRecordIsAppendedOnce(t *testing.T) {
	tr := newTrail(t)
	subject := names.AuditSubject("redelivered")
	first, second := tr.appender(), tr.appender()
	tr.append(first, subject, "decision-1")
	// Another replica appends after it: first's head is now stale.
	tr.append(second, subject, "decision-2")
	// The first decision is redelivered, to each writer in turn: a stale head (first)
	// and an up-to-date one (second); a fresh writer guesses an empty subject.
	for _, a := range []*auditlog.Appender{first, second, tr.appender()} {
		ack := tr.append(a, subject, "decision-1")
		if !ack.Duplicate {
			t.Fatalf("redelivered decision stored again at seq %d", ack.Sequence)
		}
	}
	tr.append(first, subject, "decision-3")
	sum, err := tr.verify(subject)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 3 || sum.Last[subject].N != 3 {
		t.Fatalf("summary %+v: want 3 records", sum)
	}
}

func TestAnEvictedHeadIsReadBack(t *testing.T) {
	tr := newTrail(t)
	_, js := tr.srv.Conn(t)
	a := auditlog.New(js, names.AuditStream(), auditlog.SubjectPrefix(names), tr.key).WithCacheSize(1)
	runs := []string{names.AuditSubject("r1"), names.AuditSubject("r2")}
	for i := range 6 {
		tr.append(a, runs[i%2], fmt.Sprintf("rec-%d", i))
	}
	for _, s := range runs {
		if sum, err := tr.verify(s); err != nil || sum.Records != 3 {
			t.Fatalf("%s: %+v %v", s, sum, err)
		}
	}
}

func TestExportRoundTripsAndVerifies(t *testing.T) {
	tr := newTrail(t)
	subject, _ := tr.chainOf("exported", 3)
	var buf bytes.Buffer
	pub := tr.key.Public().(ed25519.PublicKey)
	if err := auditchain.Export(&buf, tr.read(subject), pub); err != nil {
		t.Fatal(err)
	}
	recs, gotPub, err := auditchain.ReadExport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !gotPub.Equal(pub) || len(recs) != 3 {
		t.Fatalf("export: key %x, %d records", gotPub, len(recs))
	}
	if _, err := auditchain.Verify(recs, auditchain.VerifyOptions{PublicKey: pub, FromStart: true}); err != nil {
		t.Fatal(err)
	}
	recs[1].Data = bytes.Replace(recs[1].Data, []byte(`"allow"`), []byte(`"deny"`), 1)
	_, err = auditchain.Verify(recs, auditchain.VerifyOptions{PublicKey: pub, FromStart: true})
	mustBreak(t, err, recs[1].Seq, auditchain.BreakHash)
}

// TestAForeignRecordUnderItsIDIsNotTakenForTheAppend: another writer of the audit stream
// stored a message under the id of a record before it was appended — on another audit
// subject, or on the record's own subject without the signing key. The stream answers the
// append "duplicate"; the appender reads the stored message back, finds it is not its
// record, and fails with ErrForeignDuplicate instead of reporting the record stored.
func TestAForeignRecordUnderItsIDIsNotTakenForTheAppend(t *testing.T) {
	tr := newTrail(t)
	subject := names.AuditSubject("placeholders")
	placeholder := func(subject, id string, key ed25519.PrivateKey) {
		t.Helper()
		m := record(t, subject, id)
		m.Header.Set(jetstream.MsgIDHeader, id)
		if key != nil || subject == names.AuditSubject("placeholders") {
			auditchain.Seal(m, 1, auditchain.ZeroHash, key)
		}
		if _, err := tr.js.PublishMsg(tr.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	_, otherKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	placeholder(names.MCPCallAuditSubject(), "decision-1", nil)
	placeholder(subject, "decision-2", nil)      // unsigned, on the record's own subject
	placeholder(subject, "decision-3", otherKey) // signed by another key
	a := tr.appender()
	for _, id := range []string{"decision-1", "decision-2", "decision-3"} {
		msg := record(t, subject, id)
		msg.Header.Set(jetstream.MsgIDHeader, id)
		ack, err := a.Append(tr.ctx, msg)
		if !errors.Is(err, auditlog.ErrForeignDuplicate) {
			t.Errorf("append %s over a foreign placeholder: ack %+v, error %v; want ErrForeignDuplicate", id, ack, err)
		}
	}
}
