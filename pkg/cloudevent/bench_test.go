package cloudevent_test

import (
	"testing"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
)

func BenchmarkEncodeMsg(b *testing.B) {
	e := sampleEvent()
	b.ReportAllocs()
	for b.Loop() {
		_ = cloudevent.EncodeMsg("awaken.work.gate.run-7", e)
	}
}

func BenchmarkDecodeMsgBinary(b *testing.B) {
	m := cloudevent.EncodeMsg("awaken.work.gate.run-7", sampleEvent())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cloudevent.DecodeMsg(m.Header, m.Data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMsgStructured(b *testing.B) {
	h := map[string][]string{"Content-Type": {"application/cloudevents+json"}}
	body := []byte(`{"specversion":"1.0","id":"i-1","source":"platform/x","type":"io.awaken.toolbatch.requested.v1","time":"2026-01-02T03:04:05Z","data":{"run_id":"run-7","step":3}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cloudevent.DecodeMsg(h, body); err != nil {
			b.Fatal(err)
		}
	}
}
