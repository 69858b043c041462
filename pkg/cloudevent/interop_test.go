package cloudevent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
)

// sdkEvent is an event built with the CloudEvents Go SDK, the reference implementation.
func sdkEvent(t *testing.T) event.Event {
	t.Helper()
	e := event.New()
	e.SetID("sdk-1")
	e.SetSource("platform/sdk")
	e.SetType("io.awaken.toolbatch.requested.v1")
	e.SetSubject("run-7")
	e.SetTime(fixedTime)
	e.SetExtension("traceparent", "00-abc-01")
	if err := e.SetData(event.ApplicationJSON, map[string]any{"run_id": "run-7", "step": 3}); err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

func checkDecodedSDKEvent(t *testing.T, got cloudevent.Event, want event.Event) {
	t.Helper()
	if got.ID != want.ID() || got.Source != want.Source() || got.Type != want.Type() ||
		got.Subject != want.Subject() || !got.Time.Equal(want.Time()) {
		t.Fatalf("attributes: got %+v", got)
	}
	if got.Extensions["traceparent"] != "00-abc-01" {
		t.Fatalf("extensions: got %v", got.Extensions)
	}
	var gotData, wantData any
	if err := json.Unmarshal(got.Data, &gotData); err != nil {
		t.Fatalf("data %q: %v", got.Data, err)
	}
	if err := json.Unmarshal(want.Data(), &wantData); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(gotData, wantData) {
		t.Fatalf("data: got %s want %s", got.Data, want.Data())
	}
}

func jsonEqual(a, b any) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

func TestInteropSDKBinaryDecodes(t *testing.T) {
	want := sdkEvent(t)
	var body bytes.Buffer
	h, err := cejs.WriteMsg(context.Background(), binding.ToMessage(&want), &body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cloudevent.DecodeMsg(h, body.Bytes())
	if err != nil {
		t.Fatalf("DecodeMsg of an sdk-go binary message (headers %v): %v", h, err)
	}
	checkDecodedSDKEvent(t, got, want)
	if got.DataContentType != event.ApplicationJSON {
		t.Fatalf("datacontenttype %q", got.DataContentType)
	}
}

func TestInteropSDKStructuredDecodes(t *testing.T) {
	want := sdkEvent(t)
	body, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		header nats.Header
	}{
		{"with structured content type", nats.Header{"Content-Type": {"application/cloudevents+json"}}},
		// sdk-go's own structured writer sets no header at all, like the released binding.
		{"without headers", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cloudevent.DecodeMsg(tc.header, body)
			if err != nil {
				t.Fatalf("DecodeMsg of %s: %v", body, err)
			}
			checkDecodedSDKEvent(t, got, want)
		})
	}
}

func TestInteropOwnEncodingDecodesWithSDK(t *testing.T) {
	own := sampleEvent()
	own.Extensions = map[string]string{"traceparent": "00-abc-01"}
	m := cloudevent.EncodeMsg("awaken.work.gate.run-7", own)

	got, err := binding.ToEvent(context.Background(), cejs.NewMessage(m))
	if err != nil {
		t.Fatalf("sdk-go could not read our message: %v", err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("sdk-go finds our event invalid: %v", err)
	}
	if got.ID() != own.ID || got.Source() != own.Source || got.Type() != own.Type ||
		got.Subject() != own.Subject || !got.Time().Equal(own.Time) || got.SpecVersion() != "1.0" {
		t.Fatalf("sdk-go read %s", got)
	}
	if v, _ := got.Extensions()["traceparent"].(string); v != "00-abc-01" {
		t.Fatalf("extensions %v", got.Extensions())
	}
	if !bytes.Equal(got.Data(), own.Data) {
		t.Fatalf("data %q want %q", got.Data(), own.Data)
	}
	var payload map[string]any
	if err := got.DataAs(&payload); err != nil || payload["run_id"] != "run-7" {
		t.Fatalf("DataAs: %v %v", payload, err)
	}
}
