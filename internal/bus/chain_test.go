package bus_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
)

// TestPublishAllAppendsChainedSubjectsInOrder: with a chain, PublishAll appends the
// records of a chained subject in input order (the gate's probe audits several calls of
// one run at once) beside the plain publishes, a re-publish of the same messages appends
// nothing, and PublishAtomic refuses a chained subject.
func TestPublishAllAppendsChainedSubjectsInOrder(t *testing.T) {
	h := newHarness(t)
	key, _, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := h.pub.WithChain(auditlog.New(h.js, h.names.AuditStream(), auditlog.SubjectPrefix(h.names), key))
	runA, runB := h.names.AuditSubject("run-a"), h.names.AuditSubject("run-b")
	var out []bus.Outgoing
	for i := range 4 {
		out = append(out, bus.Outgoing{Subject: runA, Event: h.event(fmt.Sprintf("a-%d", i), map[string]int{"i": i})})
		out = append(out, bus.Outgoing{Subject: runB, Event: h.event(fmt.Sprintf("b-%d", i), map[string]int{"i": i})})
	}
	out = append(out, bus.Outgoing{Subject: h.names.EventsSubject("run-a"), Event: h.event("fact", map[string]int{})})
	for range 2 { // the second time: a redelivery, all duplicates
		if err := pub.PublishAll(h.ctx, out); err != nil {
			t.Fatal(err)
		}
	}
	for _, subject := range []string{runA, runB} {
		recs, err := auditchain.Read(h.ctx, h.js, h.names.AuditStream(), auditchain.Query{Subject: subject})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := auditchain.Verify(recs, auditchain.VerifyOptions{PublicKey: key.Public().(ed25519.PublicKey), FromStart: true})
		if err != nil || sum.Records != 4 {
			t.Fatalf("%s: %+v %v", subject, sum, err)
		}
		for i, r := range recs {
			if want := fmt.Sprintf("%s-%d", subject[len(subject)-1:], i); r.Header.Get(cloudevent.HeaderID) != want {
				t.Fatalf("%s record %d is %s, want %s: input order lost", subject, i+1, r.Header.Get(cloudevent.HeaderID), want)
			}
		}
	}
	if n := len(h.streamMsgs(h.names.EventsStream())); n != 1 {
		t.Fatalf("events stream holds %d messages, want the one fact", n)
	}
	err = pub.PublishAtomic(h.ctx, []bus.Outgoing{{Subject: runA, Event: h.event("atomic", map[string]int{})}})
	if err == nil || errors.Is(err, bus.ErrAtomicDuplicate) {
		t.Fatalf("atomic publish of a chained subject: %v", err)
	}
}
