package cloudevent_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// parseHeaderBlob turns "k: v" lines into a header, so the fuzzer can shape headers.
func parseHeaderBlob(blob string) nats.Header {
	if blob == "" {
		return nil
	}
	h := nats.Header{}
	for _, line := range strings.Split(blob, "\n") {
		k, v, _ := strings.Cut(line, ":")
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h
}

// FuzzDecodeMsg checks that DecodeMsg never panics, fails only with a rejection, accepts
// only events with the required attributes, and that whatever it accepts survives
// EncodeMsg/DecodeMsg unchanged.
func FuzzDecodeMsg(f *testing.F) {
	seeds := []struct{ headers, body string }{
		{"ce-id: i\nce-source: s\nce-type: t\nce-specversion: 1.0\nContent-Type: application/json", `{"a":1}`},
		{"CE-ID: a%20b\nce-source: s%zz\nce-type: t\nce-specversion: 1.0\nce-time: 2026-01-02T03:04:05Z\nce-x: %C3%A9", `{}`},
		{"ce-id: i\nce-source: s\nce-type: t\nce-specversion: 0.3", ``},
		{"ce-id: i\nce-specversion: 1.0\nContent-Type: text/plain", `x`},
		{"ce-id: %FF\nce-source: s\nce-type: t\nce-specversion: 1.0", `{}`},
		{"Content-Type: application/cloudevents+json", `{"specversion":"1.0","id":"i","source":"s","type":"t","data":{"x":[1]}}`},
		{"Content-Type: application/cloudevents+json", `{"specversion":"1.0","id":"i","source":"s","type":"t","data_base64":"AAE="}`},
		{"", `{"specversion":"1.0","id":"i","source":"s","type":"t","n":1,"b":false,"time":"2026-01-02T03:04:05.1+02:00"}`},
		{"", `not json`},
		{"Content-Type: application/json", `{}`},
	}
	for _, s := range seeds {
		f.Add(s.headers, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, headers string, body []byte) {
		e, err := cloudevent.DecodeMsg(parseHeaderBlob(headers), body)
		if err != nil {
			var rej *contracts.Rejection
			if !errors.As(err, &rej) || rej.Code == "" {
				t.Fatalf("error is not a coded rejection: %v", err)
			}
			return
		}
		if e.ID == "" || e.Source == "" || e.Type == "" {
			t.Fatalf("accepted an event without required attributes: %+v", e)
		}
		m := cloudevent.EncodeMsg("fuzz", e)
		again, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil {
			t.Fatalf("re-decoding our own encoding of %+v failed: %v (headers %v)", e, err, m.Header)
		}
		if !again.Time.Equal(e.Time) {
			t.Fatalf("time changed: %v -> %v", e.Time, again.Time)
		}
		again.Time = e.Time
		if e.DataContentType == "" {
			e.DataContentType = cloudevent.ContentTypeJSON
		}
		if len(e.Data) == 0 && len(again.Data) == 0 {
			again.Data = e.Data
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip changed the event:\n was %#v\n now %#v", e, again)
		}
	})
}
