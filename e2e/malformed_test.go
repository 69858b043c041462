package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
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
	cases := []struct {
		name string
		msg  func(id string) *nats.Msg
		code contracts.RejectCode
	}{
		{"wrong ce-type", func(id string) *nats.Msg {
			m := rawSubmission(id, []byte(good))
			m.Header.Set("ce-type", "com.example.other")
			return m
		}, contracts.RejectWrongType},
		{"missing CE headers", func(id string) *nats.Msg {
			m := rawSubmission(id, []byte(good))
			m.Header.Del("ce-source")
			return m
		}, contracts.RejectMissingAttribute},
		{"wrong content type", func(id string) *nats.Msg {
			m := rawSubmission(id, []byte(good))
			m.Header.Set("Content-Type", "text/plain")
			return m
		}, contracts.RejectUnsupportedContent},
		{"invalid JSON", func(id string) *nats.Msg { return rawSubmission(id, []byte(`{"run_id":`)) }, contracts.RejectInvalidJSON},
		{"invalid UTF-8", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `"x"`, "\"\xff\xfe\"", 1)))
		}, contracts.RejectInvalidUTF8},
		{"nesting 10000 deep", func(id string) *nats.Msg { return rawSubmission(id, []byte(deep)) }, contracts.RejectTooDeep},
		{"id with a dot", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `"run_id":"r"`, `"run_id":"r.x"`, 1)))
		}, contracts.RejectInvalidID},
		// A call id may hold any printable character since provider ids are kept verbatim
		// (it is encoded where it names a key or subject); a run id names subjects itself.
		{"run id with a wildcard", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `"run_id":"r"`, `"run_id":"r*"`, 1)))
		}, contracts.RejectInvalidID},
		{"call id with a control character", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `"call_id":"c1"`, `"call_id":"c\u0007"`, 1)))
		}, contracts.RejectInvalidID},
		{"id with a space", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `"thread_id":"t"`, `"thread_id":"t >"`, 1)))
		}, contracts.RejectInvalidID},
		{"negative step", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `"step":1`, `"step":-1`, 1)))
		}, contracts.RejectInvalidStep},
		{"unknown top-level field", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `"step":1`, `"step":1,"sudo":true`, 1)))
		}, contracts.RejectUnknownField},
		{"empty calls", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(`{"run_id":"r","thread_id":"t","step":1,"agent":{"snapshot_id":"s","tools":[]},"calls":[]}`))
		}, contracts.RejectEmptyBatch},
		{"duplicate call id", func(id string) *nats.Msg {
			return rawSubmission(id, []byte(strings.Replace(good, `}}]}`, `}},{"call_id":"c1","tool_id":"echo","arguments":{}}]}`, 1)))
		}, contracts.RejectDuplicateCall},
	}

	rejected := make(chan contracts.BatchRejected, 64)
	sub, err := nc.Subscribe(h.cfg.Names().RejectedSubject(), func(m *nats.Msg) {
		var r contracts.BatchRejected
		if json.Unmarshal(m.Data, &r) == nil {
			rejected <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

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
