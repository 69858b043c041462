package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// rawSubmission builds a binary-mode CloudEvent by hand, so each test row can break one
// part of it.
func rawSubmission(id string, body []byte) *nats.Msg {
	m := nats.NewMsg("awaken.batches.submit")
	m.Header.Set("ce-id", id)
	m.Header.Set("ce-source", "test/hostile")
	m.Header.Set("ce-type", contracts.TypeBatchRequested)
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("Content-Type", "application/json")
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Data = body
	return m
}

func TestPipeline_malformedSubmissionsAreRejectedAndKept(t *testing.T) {
	h := newHarness(t)
	nc, js := h.srv.Conn(t)
	good := `{"run_id":"r","thread_id":"t","step":1,"agent":{"snapshot_id":"s","tools":["echo"]},"calls":[{"call_id":"c1","tool_id":"echo","arguments":{"text":"x"}}]}`
	deep := `{"run_id":"r","thread_id":"t","step":1,"agent":{"snapshot_id":"s","tools":[]},"calls":[{"call_id":"c1","tool_id":"echo","arguments":` +
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}]}`
	// Each row breaks one thing: body submits the JSON text b; goodWith submits good with
	// from replaced by to; goodHeaders submits good with its headers edited.
	body := func(b string) func(id string) *nats.Msg {
		return func(id string) *nats.Msg { return rawSubmission(id, []byte(b)) }
	}
	goodWith := func(from, to string) func(id string) *nats.Msg { return body(strings.Replace(good, from, to, 1)) }
	goodHeaders := func(edit func(nats.Header)) func(id string) *nats.Msg {
		return func(id string) *nats.Msg {
			m := rawSubmission(id, []byte(good))
			edit(m.Header)
			return m
		}
	}
	cases := []struct {
		name string
		msg  func(id string) *nats.Msg
		code contracts.RejectCode
	}{
		{"wrong ce-type", goodHeaders(func(h nats.Header) { h.Set("ce-type", "com.example.other") }), contracts.RejectWrongType},
		{"missing CE headers", goodHeaders(func(h nats.Header) { h.Del("ce-source") }), contracts.RejectMissingAttribute},
		{"wrong content type", goodHeaders(func(h nats.Header) { h.Set("Content-Type", "text/plain") }), contracts.RejectUnsupportedContent},
		{"invalid JSON", body(`{"run_id":`), contracts.RejectInvalidJSON},
		{"invalid UTF-8", goodWith(`"x"`, "\"\xff\xfe\""), contracts.RejectInvalidUTF8},
		{"nesting 10000 deep", body(deep), contracts.RejectTooDeep},
		{"id with a dot", goodWith(`"run_id":"r"`, `"run_id":"r.x"`), contracts.RejectInvalidID},
		// A call id may hold any printable character since provider ids are kept verbatim
		// (it is encoded where it names a key or subject); a run id names subjects itself.
		{"run id with a wildcard", goodWith(`"run_id":"r"`, `"run_id":"r*"`), contracts.RejectInvalidID},
		{"call id with a control character", goodWith(`"call_id":"c1"`, `"call_id":"c\u0007"`), contracts.RejectInvalidID},
		{"id with a space", goodWith(`"thread_id":"t"`, `"thread_id":"t >"`), contracts.RejectInvalidID},
		{"negative step", goodWith(`"step":1`, `"step":-1`), contracts.RejectInvalidStep},
		{"unknown top-level field", goodWith(`"step":1`, `"step":1,"sudo":true`), contracts.RejectUnknownField},
		{"empty calls", body(`{"run_id":"r","thread_id":"t","step":1,"agent":{"snapshot_id":"s","tools":[]},"calls":[]}`), contracts.RejectEmptyBatch},
		{"duplicate call id", goodWith(`}}]}`, `}},{"call_id":"c1","tool_id":"echo","arguments":{}}]}`), contracts.RejectDuplicateCall},
	}

	rejected := servicetest.Rejections(t, nc, h.cfg.Names())

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "hostile-" + string(rune('a'+i))
			if _, err := js.PublishMsg(ctxFor(t, 10*time.Second), tc.msg(id)); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-rejected:
				if r.Code != string(tc.code) || r.EventID != id {
					t.Errorf("rejected %+v, want code %s for event %s", r, tc.code, id)
				}
				if r.Message == "" {
					t.Error("a rejection must say why")
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no rejection event for %s", tc.name)
			}
		})
	}

	// Every rejected message is kept on the dead-letter stream with its reason.
	stream, err := js.Stream(ctxFor(t, 10*time.Second), h.cfg.Names().DeadLetterStream())
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		info, err := stream.Info(ctxFor(t, 5*time.Second))
		return err == nil && info.State.Msgs >= uint64(len(cases))
	}, "every malformed submission on the dead-letter stream")
	dl, err := stream.GetLastMsgForSubject(ctxFor(t, 5*time.Second), h.cfg.Names().DeadLetterSubject(contracts.ConsumerBatcherSubmit))
	if err != nil {
		t.Fatal(err)
	}
	if dl.Header.Get("Awaken-Dead-Code") == "" || dl.Header.Get("Awaken-Dead-Reason") == "" {
		t.Errorf("dead letter lacks its reason: %v", dl.Header)
	}

	// The pipeline is healthy afterwards.
	res := h.mustRun(batch("run-after-hostile", 1, []string{"echo"}, call("c1", "echo", map[string]any{"text": "still here"})))
	if got := res.Results[0].Output.Text(); got != "still here" {
		t.Errorf("good batch after hostile input: %q", got)
	}
}
