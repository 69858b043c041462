package contracts

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// plainPhaseInputs are phases as the encoder writes them, and variations the general
// decoder accepts or refuses.
var plainPhaseInputs = []string{
	`{"Executing":{"attempt":1}}`, `{"Executing":{"attempt":65535}}`, ` { "Executing" : { "attempt" : 2 } } `,
	`{"Executing":{"attempt":0}}`, `{"Executing":{"attempt":65536}}`, `{"Executing":{"attempt":1.0}}`,
	`{"Executing":{"attempt":-1}}`, `{"Executing":{"attempt":null}}`, `{"Executing":{"attempt":"1"}}`,
	`{"Executing":{"Attempt":1}}`, `{"Executing":{"attempt":1,"attempt":2}}`, `{"Executing":{"attempt":1,"x":1}}`,
	`{"Executing":{"attempt":1},"Executing":{"attempt":1}}`, `{"Executing":{"attempt":1},"Completed":{}}`,
	`{"Executing":{"atte\u006dpt":1}}`, `{"Execu\u0074ing":{"attempt":1}}`, `{"Executing":[1]}`, `{"Executing":1}`,
	`{"Completed":{"call_id":"c1","content":[{"type":"text","text":"x0"}],"is_error":false}}`,
	`{"Completed":{"call_id":"c\"1","content":[{"type":"text","text":"a}\\\"],{"}]}}`,
	`{"Completed":{"call_id":"c1"}}`, `{"Completed":{"call_id":"c1","call_id":"c2","content":[]}}`,
	`{"Completed":{"call_id":"c1","content":[],"unknown":1}}`, `{"Completed":null}`, `{"Completed":{}}`,
	`{"Awaiting":{"wait":{"kind":"tool_permission","correlation_id":"t1"}}}`, `{"Indeterminate":{"reason":"x"}}`,
	`{}`, `{"Executing":{"attempt":1}`, `{"Executing":{"attempt":1}}x`,
}

// TestPlainPhaseDecodingAgrees: the plain decoder of the Executing and Completed phases
// takes the encoder's own output and decides nothing the general path would decide
// otherwise: wherever it answers, the general path gives the same phase.
func TestPlainPhaseDecodingAgrees(t *testing.T) {
	for _, p := range []ToolCallPhase{ExecutingPhase(1), ExecutingPhase(3),
		CompletedPhase(TextOutput("c1", "x0 \"quoted\" }{"))} {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodePhasePlain(b)
		if !ok || !reflect.DeepEqual(got, p) {
			t.Errorf("plain decoding of the encoder's %s = %+v, %v; want %+v", b, got, ok, p)
		}
	}
	for _, in := range plainPhaseInputs {
		plain, ok := decodePhasePlain(bytes.TrimSpace([]byte(in)))
		if !ok {
			continue
		}
		general, err := decodePhaseObject(bytes.TrimSpace([]byte(in)))
		if err != nil || !reflect.DeepEqual(plain, general) {
			t.Errorf("%s: plain %+v, general %+v, %v", in, plain, general, err)
		}
	}
}

// TestPlainRecoveryDecodingAgrees is TestPlainPhaseDecodingAgrees for the recovery policy.
func TestPlainRecoveryDecodingAgrees(t *testing.T) {
	for _, p := range []ToolRecoveryPolicy{DefaultRecoveryPolicy(), {Mode: ModeReplaySafe, MaxAttempts: 3}} {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodeRecoveryPlain(b)
		if !ok || got != p {
			t.Errorf("plain decoding of the encoder's %s = %+v, %v; want %+v", b, got, ok, p)
		}
	}
	for _, in := range []string{`{}`, `{"mode":"replay_safe"}`, `{"max_attempts":2}`, `{"mode":"replay_safe","max_attempts":3}`,
		`{"mode":"replay_safe","mode":"idempotent"}`, `{"MODE":"replay_safe"}`, `{"mode":"nope"}`, `{"mode":null}`,
		`{"max_attempts":0}`, `{"max_attempts":70000}`, `{"max_attempts":1.5}`, `{"mode":"replay\u005fsafe"}`, `{"x":1}`} {
		plain, ok := decodeRecoveryPlain([]byte(in))
		if !ok {
			continue
		}
		general, err := decodeRecoveryGeneral([]byte(in))
		if err != nil || plain != general {
			t.Errorf("%s: plain %+v, general %+v, %v", in, plain, general, err)
		}
	}
}

// FuzzPlainPhaseDecoding checks the agreement on any input.
func FuzzPlainPhaseDecoding(f *testing.F) {
	for _, in := range plainPhaseInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := bytes.TrimSpace(data)
		plain, ok := decodePhasePlain(b)
		if !ok {
			return
		}
		general, err := decodePhaseObject(b)
		if err != nil || !reflect.DeepEqual(plain, general) {
			t.Fatalf("%q: plain %+v, general %+v, %v", data, plain, general, err)
		}
	})
}
