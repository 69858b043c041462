package cloudevent_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const testType = "io.awaken.test.work.v1"

var fixedTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func sampleEvent() cloudevent.Event {
	return cloudevent.Event{
		ID:              "tool-batch:run-7:3",
		Source:          "awaken/batcher",
		Type:            testType,
		Subject:         "call_1",
		Time:            fixedTime,
		DataContentType: cloudevent.ContentTypeJSON,
		Data:            []byte(`{"run_id":"run-7","step":3}`),
		Extensions:      map[string]string{"runid": "run-7"},
	}
}

func TestEncodeMsgGoldenHeaders(t *testing.T) {
	m := cloudevent.EncodeMsg("awaken.work.gate.run-7", sampleEvent())
	want := nats.Header{
		"ce-id":          {"tool-batch:run-7:3"},
		"ce-source":      {"awaken/batcher"},
		"ce-type":        {testType},
		"ce-specversion": {"1.0"},
		"ce-time":        {"2026-01-02T03:04:05.000000006Z"},
		"ce-subject":     {"call_1"},
		"ce-runid":       {"run-7"},
		"Content-Type":   {"application/json"},
		"Nats-Msg-Id":    {"tool-batch:run-7:3"},
	}
	if !reflect.DeepEqual(m.Header, want) {
		t.Fatalf("headers:\n got %v\nwant %v", m.Header, want)
	}
	if m.Subject != "awaken.work.gate.run-7" || string(m.Data) != `{"run_id":"run-7","step":3}` {
		t.Fatalf("subject %q data %q", m.Subject, m.Data)
	}
}

func TestEncodeMsgOmitsUnsetOptionalAttributes(t *testing.T) {
	e := cloudevent.Event{ID: "i", Source: "s", Type: "t", Data: []byte(`{}`)}
	m := cloudevent.EncodeMsg("x", e)
	for _, h := range []string{"ce-time", "ce-subject"} {
		if _, ok := m.Header[h]; ok {
			t.Errorf("header %s written for an unset attribute", h)
		}
	}
	if got := m.Header.Get("Content-Type"); got != cloudevent.ContentTypeJSON {
		t.Errorf("Content-Type = %q, want the JSON default", got)
	}
}

func TestEncodeMsgPercentEncodesHeaderValues(t *testing.T) {
	e := cloudevent.Event{ID: `a b"c%d`, Source: "src/é", Type: "t", Subject: "line\r\nbreak", Data: []byte(`{}`)}
	m := cloudevent.EncodeMsg("x", e)
	wants := map[string]string{
		"ce-id":       "a%20b%22c%25d",
		"ce-source":   "src/%C3%A9",
		"ce-subject":  "line%0D%0Abreak",
		"Nats-Msg-Id": "a%20b%22c%25d",
	}
	for h, want := range wants {
		if got := m.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	got, err := cloudevent.DecodeMsg(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != e.ID || got.Source != e.Source || got.Subject != e.Subject {
		t.Fatalf("round trip: got %+v", got)
	}
}

func TestNewEvent(t *testing.T) {
	before := time.Now().UTC()
	e, err := cloudevent.NewEvent("id-1", "awaken/gate", contracts.TypeAudit, map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Data) != `{"n":1}` || e.DataContentType != cloudevent.ContentTypeJSON {
		t.Fatalf("data %q content type %q", e.Data, e.DataContentType)
	}
	if e.Time.Location() != time.UTC || e.Time.Before(before) {
		t.Fatalf("time %v is not now in UTC", e.Time)
	}
	for _, bad := range []struct{ id, src, typ string }{{"", "s", "t"}, {"i", "", "t"}, {"i", "s", ""}} {
		if _, err := cloudevent.NewEvent(bad.id, bad.src, bad.typ, 1); err == nil {
			t.Errorf("NewEvent(%q,%q,%q) accepted an empty required attribute", bad.id, bad.src, bad.typ)
		}
	}
	if _, err := cloudevent.NewEvent("i", "s", "t", func() {}); err == nil {
		t.Error("NewEvent accepted an unmarshalable payload")
	}
}

func TestSetExtension(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"runid", true},
		{"traceparent", true},
		{"a1", true},
		{"", false},
		{"RunID", false},
		{"run_id", false},
		{"id", false},
		{"type", false},
		{"averyveryverylongname1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e cloudevent.Event
			err := e.SetExtension(tc.name, "v")
			if (err == nil) != tc.ok {
				t.Fatalf("SetExtension(%q) err = %v, want ok=%v", tc.name, err, tc.ok)
			}
		})
	}
}

func TestDecodeBinary(t *testing.T) {
	tests := []struct {
		name   string
		header nats.Header
		check  func(t *testing.T, e cloudevent.Event)
	}{
		{
			name:   "own encoding round-trips",
			header: cloudevent.EncodeMsg("x", sampleEvent()).Header,
			check: func(t *testing.T, e cloudevent.Event) {
				want := sampleEvent()
				if e.ID != want.ID || e.Source != want.Source || e.Type != want.Type || e.Subject != want.Subject ||
					!e.Time.Equal(want.Time) || e.DataContentType != want.DataContentType ||
					!reflect.DeepEqual(e.Extensions, want.Extensions) {
					t.Fatalf("got %+v\nwant %+v", e, want)
				}
			},
		},
		{
			name: "header names are case-insensitive",
			header: nats.Header{
				"CE-ID": {"i"}, "Ce-Source": {"s"}, "ce-TYPE": {"t"}, "CE-SPECVERSION": {"1.0"},
				"CE-TraceParent": {"00-abc"}, "content-type": {"application/json; charset=utf-8"},
			},
			check: func(t *testing.T, e cloudevent.Event) {
				if e.ID != "i" || e.Source != "s" || e.Type != "t" || e.Extensions["traceparent"] != "00-abc" {
					t.Fatalf("got %+v", e)
				}
			},
		},
		{
			name:   "absent content type is accepted",
			header: nats.Header{"ce-id": {"i"}, "ce-source": {"s"}, "ce-type": {"t"}, "ce-specversion": {"1.0"}},
			check: func(t *testing.T, e cloudevent.Event) {
				if e.DataContentType != "" || e.Time != (time.Time{}) || e.Extensions != nil {
					t.Fatalf("got %+v", e)
				}
			},
		},
		{
			name: "ce-datacontenttype alone is honoured",
			header: nats.Header{"ce-id": {"i"}, "ce-source": {"s"}, "ce-type": {"t"}, "ce-specversion": {"1.0"},
				"ce-datacontenttype": {"application/json"}},
			check: func(t *testing.T, e cloudevent.Event) {
				if e.DataContentType != "application/json" {
					t.Fatalf("content type %q", e.DataContentType)
				}
			},
		},
		{
			name: "time without fraction and with an offset",
			header: nats.Header{"ce-id": {"i"}, "ce-source": {"s"}, "ce-type": {"t"}, "ce-specversion": {"1.0"},
				"ce-time": {"2026-01-02T04:04:05+01:00"}},
			check: func(t *testing.T, e cloudevent.Event) {
				if !e.Time.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
					t.Fatalf("time %v", e.Time)
				}
			},
		},
		{
			name:   "a lone percent sign is kept literally",
			header: nats.Header{"ce-id": {"50%"}, "ce-source": {"s%zz"}, "ce-type": {"t"}, "ce-specversion": {"1.0"}},
			check: func(t *testing.T, e cloudevent.Event) {
				if e.ID != "50%" || e.Source != "s%zz" {
					t.Fatalf("got %+v", e)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := cloudevent.DecodeMsg(tc.header, []byte(`{"a":1}`))
			if err != nil {
				t.Fatalf("DecodeMsg: %v", err)
			}
			if string(e.Data) != `{"a":1}` {
				t.Fatalf("data %q", e.Data)
			}
			tc.check(t, e)
		})
	}
}

func TestDecodeStructured(t *testing.T) {
	body := `{"specversion":"1.0","id":"i-1","source":"platform/x","type":"io.awaken.toolbatch.requested.v1",
		"subject":"run-7","time":"2026-01-02T03:04:05.000000006Z","datacontenttype":"application/json",
		"traceparent":"00-1","attempt":3,"sampled":true,"nothing":null,"data":{"run_id":"run-7"}}`
	tests := []struct {
		name   string
		header nats.Header
		body   string
		want   cloudevent.Event
	}{
		{
			name:   "application/cloudevents+json",
			header: nats.Header{"Content-Type": {"application/cloudevents+json; charset=UTF-8"}},
			body:   body,
			want: cloudevent.Event{ID: "i-1", Source: "platform/x", Type: contracts.TypeBatchRequested, Subject: "run-7",
				Time: fixedTime, DataContentType: "application/json", Data: []byte(`{"run_id":"run-7"}`),
				Extensions: map[string]string{"traceparent": "00-1", "attempt": "3", "sampled": "true"}},
		},
		{
			name: "no headers at all (released binding v1.0.2)",
			body: `{"specversion":"1.0","id":"i","source":"s","type":"t","data":[1,2]}`,
			want: cloudevent.Event{ID: "i", Source: "s", Type: "t", Data: []byte(`[1,2]`)},
		},
		{
			name:   "data_base64",
			header: nats.Header{"Content-Type": {"application/cloudevents+json"}},
			body:   `{"specversion":"1.0","id":"i","source":"s","type":"t","data_base64":"eyJhIjoxfQ=="}`,
			want:   cloudevent.Event{ID: "i", Source: "s", Type: "t", Data: []byte(`{"a":1}`)},
		},
		{
			name:   "no data",
			header: nats.Header{"Content-Type": {"application/cloudevents+json"}},
			body:   `{"specversion":"1.0","id":"i","source":"s","type":"t","data":null}`,
			want:   cloudevent.Event{ID: "i", Source: "s", Type: "t"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cloudevent.DecodeMsg(tc.header, []byte(tc.body))
			if err != nil {
				t.Fatalf("DecodeMsg: %v", err)
			}
			if !got.Time.Equal(tc.want.Time) {
				t.Fatalf("time %v, want %v", got.Time, tc.want.Time)
			}
			got.Time, tc.want.Time = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeRejections(t *testing.T) {
	bin := func(kv ...string) nats.Header {
		h := nats.Header{"ce-id": {"i"}, "ce-source": {"s"}, "ce-type": {"t"}, "ce-specversion": {"1.0"}}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
				continue
			}
			h[kv[i]] = []string{kv[i+1]}
		}
		return h
	}
	structured := nats.Header{"Content-Type": {"application/cloudevents+json"}}
	tests := []struct {
		name     string
		header   nats.Header
		body     string
		code     contracts.RejectCode
		mentions string
	}{
		{"binary missing id", bin("ce-id", ""), `{}`, contracts.RejectMissingAttribute, "ce-id"},
		{"binary missing source", bin("ce-source", ""), `{}`, contracts.RejectMissingAttribute, "ce-source"},
		{"binary missing type", bin("ce-type", ""), `{}`, contracts.RejectMissingAttribute, "ce-type"},
		{"binary missing specversion", bin("ce-specversion", ""), `{}`, contracts.RejectMissingAttribute, "specversion"},
		{"json without any CloudEvent header", nats.Header{"Content-Type": {"application/json"}}, `{}`, contracts.RejectMissingCloudEventHeaders, "ce-specversion"},
		// A submission published with no headers at all (nats pub SUBJECT BODY): its body is
		// not a structured CloudEvent, so the refusal says which headers are missing rather
		// than taking its fields for extension attributes.
		{"headerless plain submission", nil, `{"run_id":"r","step":1,"calls":[{"call_id":"c1"}]}`, contracts.RejectMissingCloudEventHeaders, "ce-id, ce-source, ce-type"},
		{"headerless plain object", nil, `{}`, contracts.RejectMissingCloudEventHeaders, "application/cloudevents+json"},
		{"binary wrong specversion", bin("ce-specversion", "0.3"), `{}`, contracts.RejectInvalidField, "specversion"},
		{"binary bad time", bin("ce-time", "yesterday"), `{}`, contracts.RejectInvalidField, "ce-time"},
		{"binary text/plain", bin("Content-Type", "text/plain"), `hi`, contracts.RejectUnsupportedContent, "text/plain"},
		{"binary xml datacontenttype", bin("ce-datacontenttype", "application/xml"), `<a/>`, contracts.RejectUnsupportedContent, "application/xml"},
		{"binary contradicting content types", bin("Content-Type", "application/json", "ce-datacontenttype", "text/plain"), `{}`, contracts.RejectInvalidField, "contradicts"},
		{"binary conflicting duplicate id", bin("CE-ID", "other"), `{}`, contracts.RejectInvalidField, "id"},
		{"binary header not UTF-8", bin("ce-source", "%FF%FE"), `{}`, contracts.RejectInvalidUTF8, "ce-source"},
		{"binary specversion not UTF-8", bin("ce-specversion", "%FF"), `{}`, contracts.RejectInvalidUTF8, "ce-specversion"},
		{"unknown content type", nats.Header{"Content-Type": {"text/plain"}}, `hi`, contracts.RejectUnsupportedContent, "text/plain"},
		{"batch mode", nats.Header{"Content-Type": {"application/cloudevents-batch+json"}}, `[]`, contracts.RejectUnsupportedContent, "batch"},
		{"structured not JSON", structured, `{"id":`, contracts.RejectInvalidJSON, "JSON"},
		{"structured array", structured, `[1]`, contracts.RejectInvalidJSON, "JSON"},
		{"structured missing specversion", structured, `{"id":"i","source":"s","type":"t"}`, contracts.RejectMissingAttribute, "specversion"},
		{"structured missing id", structured, `{"specversion":"1.0","source":"s","type":"t"}`, contracts.RejectMissingAttribute, "id"},
		{"structured missing source", structured, `{"specversion":"1.0","id":"i","type":"t"}`, contracts.RejectMissingAttribute, "source"},
		{"structured missing type", structured, `{"specversion":"1.0","id":"i","source":"s"}`, contracts.RejectMissingAttribute, "type"},
		{"structured wrong specversion", structured, `{"specversion":"0.3","id":"i","source":"s","type":"t"}`, contracts.RejectInvalidField, "specversion"},
		{"structured numeric id", structured, `{"specversion":"1.0","id":5,"source":"s","type":"t"}`, contracts.RejectInvalidField, "id"},
		{"structured object extension", structured, `{"specversion":"1.0","id":"i","source":"s","type":"t","x":{}}`, contracts.RejectInvalidField, "x"},
		{"structured data and data_base64", structured, `{"specversion":"1.0","id":"i","source":"s","type":"t","data":1,"data_base64":"MQ=="}`, contracts.RejectInvalidField, "data_base64"},
		{"structured bad base64", structured, `{"specversion":"1.0","id":"i","source":"s","type":"t","data_base64":"!!"}`, contracts.RejectInvalidField, "base64"},
		{"structured xml data", structured, `{"specversion":"1.0","id":"i","source":"s","type":"t","datacontenttype":"application/xml","data":"<a/>"}`, contracts.RejectUnsupportedContent, "application/xml"},
		{"structured bad time", structured, `{"specversion":"1.0","id":"i","source":"s","type":"t","time":"now"}`, contracts.RejectInvalidField, "time"},
		{"headerless non-JSON body", nil, `hello`, contracts.RejectInvalidJSON, "JSON"},
		{"binary extension name with underscore", bin("ce-run_id", "r"), `{}`, contracts.RejectInvalidField, "ce-run_id"},
		{"structured empty attribute name", structured, `{"specversion":"1.0","id":"i","source":"s","type":"t","":1}`, contracts.RejectInvalidField, "attribute name"},
		{"structured upper-case attribute name", structured, `{"specversion":"1.0","id":"i","source":"s","type":"t","RunID":"r"}`, contracts.RejectInvalidField, "RunID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cloudevent.DecodeMsg(tc.header, []byte(tc.body))
			var rej *contracts.Rejection
			if !errors.As(err, &rej) {
				t.Fatalf("err = %v (%T), want a *contracts.Rejection", err, err)
			}
			if rej.Code != tc.code {
				t.Fatalf("code = %s (%s), want %s", rej.Code, rej.Message, tc.code)
			}
			if !strings.Contains(rej.Message, tc.mentions) {
				t.Fatalf("message %q does not mention %q", rej.Message, tc.mentions)
			}
		})
	}
}

func TestExpectType(t *testing.T) {
	e := cloudevent.Event{Type: testType}
	if err := cloudevent.ExpectType(e); err != nil {
		t.Fatalf("no types accepts everything, got %v", err)
	}
	if err := cloudevent.ExpectType(e, contracts.TypeExecRequest, testType); err != nil {
		t.Fatalf("listed type rejected: %v", err)
	}
	err := cloudevent.ExpectType(e, contracts.TypeExecRequest)
	var rej *contracts.Rejection
	if !errors.As(err, &rej) || rej.Code != contracts.RejectWrongType {
		t.Fatalf("err = %v, want wrong_type", err)
	}
	// Another format version of an accepted type is a format this reader does not read.
	err = cloudevent.ExpectType(cloudevent.Event{Type: "io.awaken.internal.exec.requested.v2"}, contracts.TypeExecRequest)
	if !errors.As(err, &rej) || rej.Code != contracts.RejectUnsupportedFormat {
		t.Fatalf("err = %v, want unsupported_format", err)
	}
}

func TestStructuredDataIsRawJSON(t *testing.T) {
	// The data of a structured event is handed over byte for byte, so payload decoders
	// see exactly what the producer wrote (e.g. to reject unknown fields).
	body := `{"specversion":"1.0","id":"i","source":"s","type":"t","data":{"b":1,"a":[true]}}`
	e, err := cloudevent.DecodeMsg(nats.Header{"Content-Type": {"application/cloudevents+json"}}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(e.Data) || string(e.Data) != `{"b":1,"a":[true]}` {
		t.Fatalf("data %q", e.Data)
	}
}

func TestHeaderAttribute(t *testing.T) {
	m := cloudevent.EncodeMsg("x", sampleEvent())
	if typ, ok, err := cloudevent.HeaderAttribute(m.Header, cloudevent.HeaderType); !ok || err != nil || typ != sampleEvent().Type {
		t.Fatalf("type = %q, %v, %v", typ, ok, err)
	}
	// The binding matches names case-insensitively and percent-encodes values.
	h := nats.Header{"CE-TYPE": {"io.example.a%20b"}}
	if typ, ok, err := cloudevent.HeaderAttribute(h, cloudevent.HeaderType); !ok || err != nil || typ != "io.example.a b" {
		t.Fatalf("mixed-case header = %q, %v, %v", typ, ok, err)
	}
	if _, ok, _ := cloudevent.HeaderAttribute(nats.Header{}, cloudevent.HeaderType); ok {
		t.Fatal("absent header reported present")
	}
	_, ok, err := cloudevent.HeaderAttribute(nats.Header{"ce-type": {"%FF"}}, cloudevent.HeaderType)
	var rej *contracts.Rejection
	if !ok || !errors.As(err, &rej) || rej.Code != contracts.RejectInvalidUTF8 {
		t.Fatalf("invalid UTF-8 value: ok %v err %v", ok, err)
	}
}
