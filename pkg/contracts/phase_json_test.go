package contracts

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestPhaseJSONDecodingFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"null", `null`, ErrInvalidPersistedState},
		{"number", `1`, ErrInvalidPersistedState},
		{"unknown unit variant", `"Executing"`, ErrInvalidPersistedState},
		{"lower-case unit", `"requested"`, ErrInvalidPersistedState},
		{"unit as object", `{"Requested":null}`, ErrInvalidPersistedState},
		{"unknown variant", `{"Running":{}}`, ErrInvalidPersistedState},
		{"two variants", `{"Executing":{"attempt":1},"Indeterminate":{"reason":"x"}}`, ErrInvalidPersistedState},
		{"duplicate variant", `{"Executing":{"attempt":1},"Executing":{"attempt":2}}`, ErrInvalidPersistedState},
		{"empty object", `{}`, ErrInvalidPersistedState},
		{"attempt zero", `{"Executing":{"attempt":0}}`, ErrInvalidPersistedState},
		{"attempt missing", `{"Executing":{}}`, ErrInvalidPersistedState},
		{"attempt null", `{"Executing":{"attempt":null}}`, ErrInvalidPersistedState},
		{"attempt negative", `{"Executing":{"attempt":-1}}`, ErrInvalidPersistedState},
		{"attempt overflow", `{"Executing":{"attempt":65536}}`, ErrInvalidPersistedState},
		{"attempt wrong case", `{"Executing":{"Attempt":1}}`, ErrInvalidPersistedState},
		{"attempt extra field", `{"Executing":{"attempt":1,"x":1}}`, ErrInvalidPersistedState},
		{"wait missing", `{"Awaiting":{}}`, ErrInvalidPersistedState},
		{"wait kind unknown", `{"Awaiting":{"wait":{"kind":"ToolPermission","correlation_id":"c"}}}`, ErrInvalidPersistedState},
		{"wait correlation missing", `{"Awaiting":{"wait":{"kind":"tool_permission"}}}`, ErrInvalidPersistedState},
		{"wait correlation empty", `{"Awaiting":{"wait":{"kind":"tool_permission","correlation_id":""}}}`, ErrEmptyWaitCorrelation},
		{"completed null", `{"Completed":null}`, ErrInvalidPersistedState},
		{"completed missing call id", `{"Completed":{"content":[],"is_error":false}}`, ErrInvalidPersistedState},
		{"completed unknown field", `{"Completed":{"call_id":"c","content":[],"is_error":false,"x":1}}`, ErrInvalidPersistedState},
		{"indeterminate reason missing", `{"Indeterminate":{}}`, ErrInvalidPersistedState},
		{"indeterminate reason null", `{"Indeterminate":{"reason":null}}`, ErrInvalidPersistedState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ExecutingPhase(2)
			err := json.Unmarshal([]byte(tc.in), &p)
			btWantErr(t, err, tc.want, tc.in)
			if p.Kind != PhaseExecuting || p.Attempt != 2 {
				t.Fatalf("a failed decode changed the target to %+v", p)
			}
		})
	}
	var p ToolCallPhase
	if err := json.Unmarshal([]byte(`{"Awaiting":{"wait":{"kind":"approval","correlation_id":"c"}}}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Wait.Kind != WaitToolPermission {
		t.Fatalf("alias decoded as %q", p.Wait.Kind)
	}
	if b := btMustJSON(t, p); string(b) != `{"Awaiting":{"wait":{"kind":"tool_permission","correlation_id":"c"}}}` {
		t.Fatalf("alias re-encoded as %s", b)
	}
	for name, bad := range map[string]ToolCallPhase{
		"unset":            {},
		"attempt zero":     ExecutingPhase(0),
		"stray reason":     {Kind: PhaseRequested, Reason: "x"},
		"stray attempt":    {Kind: PhaseCompleted, Attempt: 1, Output: &ToolOutput{CallID: "c"}},
		"awaiting no wait": {Kind: PhaseAwaiting},
		"bad wait kind":    AwaitingPhase("later", "c"),
	} {
		if _, err := json.Marshal(bad); !errors.Is(err, ErrInvalidPersistedState) {
			t.Fatalf("marshal %s: %v", name, err)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	for p, want := range map[PhaseKind]bool{
		PhaseRequested: false, PhaseExecuting: false, PhaseAwaiting: false, PhaseCompleted: true, PhaseIndeterminate: true, "": false,
	} {
		if (ToolCallPhase{Kind: p}).IsTerminal() != want {
			t.Fatalf("%q terminal != %v", p, want)
		}
	}
}
