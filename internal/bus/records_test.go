package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestRecordsConsumerTakesOnlyAnnouncedRevisions consumes a key-value bucket's stream
// (ConsumerSpec.Records): a revision written with ce-* headers of an accepted type
// reaches the handler with the record as its data; a plain key-value write, a delete
// marker and a revision of another type are acknowledged without reaching it and without
// a dead letter; an accepted revision the handler refuses is dead-lettered with its ce-id.
func TestRecordsConsumerTakesOnlyAnnouncedRevisions(t *testing.T) {
	h := newHarness(t)
	bucket := h.names.CallsBucket()
	kv, err := h.js.KeyValue(h.ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	sub := h.consume(bus.ConsumerSpec{
		Stream: contracts.RecordStream(bucket), Durable: "records", Names: h.names,
		FilterSubjects: []string{contracts.RecordSubject(bucket, ">")},
		AckWait:        2 * time.Second, MaxDeliver: 3, BackOff: []time.Duration{20 * time.Millisecond},
		AcceptTypes: []string{contracts.TypeCallOutput}, Records: true,
	}, func(_ context.Context, d bus.Delivery) error {
		rec.add(d)
		if string(d.Event.Data) == `{"bad":true}` {
			return contracts.Reject(contracts.RejectInvalidField, "refused")
		}
		return nil
	})
	revision := func(key, typ, id, body string) {
		t.Helper()
		ev := cloudevent.Event{ID: id, Source: "awaken/test", Type: typ, Data: []byte(body)}
		m := cloudevent.EncodeMsg(contracts.RecordSubject(bucket, key), ev)
		m.Header.Del(jetstream.MsgIDHeader)
		if _, err := h.js.PublishMsg(h.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(h.ctx, "run-1.1.a", []byte(`{"plain":true}`)); err != nil {
		t.Fatal(err)
	}
	revision("run-1.1.a", contracts.TypeCallOutput, "a:output", `{"n":1}`)
	revision("run-1.1.b", contracts.TypeExecRequest, "b:exec", `{"n":2}`)
	if err := kv.Delete(h.ctx, "run-1.1.a"); err != nil {
		t.Fatal(err)
	}
	revision("run-1.1.c", contracts.TypeCallOutput, "c:output", `{"bad":true}`)
	// A header-less message on a record subject (not even a KV write of ours).
	if _, err := h.js.PublishMsg(h.ctx, &nats.Msg{Subject: contracts.RecordSubject(bucket, "run-1.1.d"), Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	h.settled(sub)

	got := rec.all()
	if len(got) != 2 || got[0].Event.ID != "a:output" || string(got[0].Event.Data) != `{"n":1}` ||
		got[0].Subject != contracts.RecordSubject(bucket, "run-1.1.a") || got[1].Event.ID != "c:output" {
		t.Fatalf("handled %d deliveries %+v, want a:output then c:output", len(got), got)
	}
	dead := h.streamMsgs(h.names.DeadLetterStream())
	if len(dead) != 1 || dead[0].Header.Get(bus.HeaderOriginalMsgID) != "c:output" ||
		dead[0].Header.Get(bus.HeaderDeadCode) != string(contracts.RejectInvalidField) {
		t.Fatalf("dead letters = %d %+v, want only c:output (invalid_field)", len(dead), dead)
	}
}

// TestRecordsConsumerDeadLettersAnotherFormatVersion: a revision announced as another
// format version of an accepted type (written by a newer version) is not ignored as
// someone else's revision: it is dead-lettered unsupported_format, without reaching the
// handler, so work this version cannot read is seen.
func TestRecordsConsumerDeadLettersAnotherFormatVersion(t *testing.T) {
	h := newHarness(t)
	bucket := h.names.CallsBucket()
	var rec recorder
	sub := h.consume(bus.ConsumerSpec{
		Stream: contracts.RecordStream(bucket), Durable: "records", Names: h.names,
		FilterSubjects: []string{contracts.RecordSubject(bucket, ">")},
		AckWait:        2 * time.Second, MaxDeliver: 3, BackOff: []time.Duration{20 * time.Millisecond},
		AcceptTypes: []string{contracts.TypeCallOutput}, Records: true,
	}, func(_ context.Context, d bus.Delivery) error {
		rec.add(d)
		return nil
	})
	ev := cloudevent.Event{ID: "a:output", Source: "awaken/test", Type: "io.awaken.internal.call.output.v2", Data: []byte(`{"n":1}`)}
	m := cloudevent.EncodeMsg(contracts.RecordSubject(bucket, "run-1.1.a"), ev)
	m.Header.Del(jetstream.MsgIDHeader)
	if _, err := h.js.PublishMsg(h.ctx, m); err != nil {
		t.Fatal(err)
	}
	h.settled(sub)
	if got := rec.all(); len(got) != 0 {
		t.Fatalf("handled %+v, want nothing", got)
	}
	dead := h.streamMsgs(h.names.DeadLetterStream())
	if len(dead) != 1 || dead[0].Header.Get(bus.HeaderDeadCode) != string(contracts.RejectUnsupportedFormat) {
		t.Fatalf("dead letters = %d %+v, want a:output (unsupported_format)", len(dead), dead)
	}
}
