package contracts

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestNormalizeCallArguments: arguments arrive as an object or as a string holding one (the
// OpenAI shape); "" means {}; a string that holds no object is the call's error.
func TestNormalizeCallArguments(t *testing.T) {
	deep := `"` + strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1) + `"`
	for _, tc := range []struct {
		name, raw, want, err string
	}{
		{"object", `{"text":"hi"}`, `{"text":"hi"}`, ""},
		{"missing", ``, `{}`, ""},
		{"null", `null`, `{}`, ""},
		{"string holding an object", `"{\"text\":\"hi\"}"`, `{"text":"hi"}`, ""},
		{"string holding an object with spaces", `" {\"a\": [1, 2]} \n"`, `{"a": [1, 2]}`, ""},
		{"empty string", `""`, `{}`, ""},
		{"blank string", `"  \n"`, `{}`, ""},
		{"array stays for the schema to judge", `[1]`, `[1]`, ""},
		{"truncated", `"{\"text\": \"hi"`, "", "does not hold a JSON object: unexpected EOF"},
		{"not json", `"hello"`, "", "does not hold a JSON object: invalid character 'h'"},
		{"array in a string", `"[1,2]"`, "", "it holds an array"},
		{"string in a string", `"\"x\""`, "", "it holds a string"},
		{"trailing data", `"{} {}"`, "", "trailing data"},
		{"repeated key", `"{\"a\":1,\"a\":2}"`, "", `repeats the key "a"`},
		{"too deep", deep, "", "nests deeper than 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizeCallArguments(json.RawMessage(tc.raw))
			if tc.err != "" {
				if err == nil || err.Kind != ToolErrorInvalidArguments || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %s, %v; want an invalid_arguments error containing %q", got, err, tc.err)
				}
				if !strings.HasPrefix(err.Error(), "invalid tool arguments: arguments are a string") && tc.name != "bad string" {
					t.Errorf("message %q", err.Error())
				}
				if string(got) != tc.raw {
					t.Errorf("the string is kept as sent: got %s", got)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestDecodeSubmission_argumentsAsAString: a string holding an object is decoded into the
// object (hash equal to the object's submission), and a bad string never refuses the batch.
func TestDecodeSubmission_argumentsAsAString(t *testing.T) {
	body := func(args string) []byte {
		return []byte(`{"run_id":"r","thread_id":"t","step":1,"agent":{"snapshot_id":"s","tools":["echo"]},` +
			`"calls":[{"call_id":"a","tool_id":"echo","arguments":{"text":"ok"}},{"call_id":"b","tool_id":"echo","arguments":` + args + `}]}`)
	}
	obj, err := DecodeSubmission(body(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	str, err := DecodeSubmission(body(`"{\"text\":\"hi\"}"`))
	if err != nil {
		t.Fatal(err)
	}
	if string(str.Calls[1].Arguments) != `{"text":"hi"}` || str.Hash() != obj.Hash() {
		t.Errorf("string arguments decoded to %s (hash equal: %v)", str.Calls[1].Arguments, str.Hash() == obj.Hash())
	}
	empty, err := DecodeSubmission(body(`""`))
	if err != nil || string(empty.Calls[1].Arguments) != `{}` {
		t.Fatalf("empty string: %v, %v", empty, err)
	}
	bad, err := DecodeSubmission(body(`"{\"text\":"`))
	if err != nil {
		var rej *Rejection
		errors.As(err, &rej)
		t.Fatalf("a bad argument string refused the batch: %v", rej)
	}
	if got := ArgumentsError(bad.Calls[1].Arguments); got == nil || ArgumentsError(bad.Calls[0].Arguments) != nil {
		t.Errorf("ArgumentsError: %v / %v", got, ArgumentsError(bad.Calls[0].Arguments))
	}
}
