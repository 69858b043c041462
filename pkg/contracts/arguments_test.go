package contracts

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeArgumentsSample(t *testing.T) {
	valid := `{"query":"go","home":{"street":"1 Main","city":"X"},"verbose":false}`
	tests := []struct {
		name    string
		raw     string
		wantErr string // substring of the error text; "" means success
	}{
		{"minimal", valid, ""},
		{"full", `{"query":"go","mode":"thorough","limit":50,"ratio":0.5,"tags":["a","c"],"labels":{"k":"v"},
			"address":{"street":"s","city":"c"},"home":{"street":"s","city":"c"},"since":"2026-01-02T03:04:05Z",
			"extra":{"any":[1,"thing"]},"verbose":true,"level":255,"count":"12","timeout":"2s","blob":"aGk=",
			"pair":[1,2],"code":"ABC","note":"n"}`, ""},
		{"optional field null", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"address":null,"mode":null}`, ""},
		{"whitespace around", "  " + valid + "\n", ""},
		{"unknown field", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"querry":"x"}`, `unknown field "querry"`},
		{"key case differs", `{"Query":"go","query":"go","home":{"street":"s","city":"c"},"verbose":true}`, `unknown field "Query"`},
		{"nested unknown field", `{"query":"go","home":{"street":"s","city":"c","zip":"1"},"verbose":true}`, `unknown field "home.zip"`},
		{"missing required", `{"home":{"street":"s","city":"c"},"verbose":true}`, `missing required field "query"`},
		{"missing nested required", `{"query":"go","home":{"street":"s"},"verbose":true}`, `missing required field "home.city"`},
		{"required null", `{"query":null,"home":{"street":"s","city":"c"},"verbose":true}`, `required field "query" cannot be null`},
		{"wrong type", `{"query":5,"home":{"street":"s","city":"c"},"verbose":true}`, `field "query": want string, got number`},
		{"wrong nested type", `{"query":"go","home":{"street":1,"city":"c"},"verbose":true}`, `field "home.street": want string, got number`},
		{"bool as string", `{"query":"go","home":{"street":"s","city":"c"},"verbose":"yes"}`, `field "verbose": want boolean, got string`},
		{"enum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"mode":"slow"}`, `field "mode": "slow" is not one of ["fast","thorough"]`},
		{"item enum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"tags":["a","z"]}`, `field "tags[1]": "z" is not one of`},
		{"unique items", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"tags":["a","a"]}`, `field "tags": item 1 is a duplicate`},
		{"max items", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"tags":["a","b","c","a"]}`, `more than 3 items`},
		{"minimum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"limit":0}`, `field "limit": 0 is less than the minimum 1`},
		{"maximum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"limit":51}`, `greater than the maximum 50`},
		{"exclusive minimum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"ratio":0}`, `field "ratio": 0 is not greater than 0`},
		{"integer with fraction", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"limit":1.5}`, `field "limit": want integer, got 1.5`},
		{"uint8 overflow", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"level":256}`, `field "level": 256 is greater than the maximum 255`},
		{"negative uint", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"level":-1}`, `less than the minimum 0`},
		{"string option wants a string", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"count":12}`, `field "count": want string, got number`},
		{"min length", `{"query":"","home":{"street":"s","city":"c"},"verbose":true}`, `field "query": shorter than 1 characters`},
		{"pattern", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"code":"abc"}`, `field "code": does not match pattern ^[A-Z]{3}$`},
		{"array length", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"pair":[1]}`, `field "pair": fewer than 2 items`},
		{"map value type", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"labels":{"k":1}}`, `field "labels.k": want string, got number`},
		{"bad time", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"since":"yesterday"}`, `invalid tool arguments: `},
		{"bad duration", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"timeout":"soon"}`, `invalid tool arguments: `},
		{"not an object", `["go"]`, `arguments: want object, got array`},
		{"not json", `{"query":`, `arguments are not valid JSON`},
		{"trailing data", valid + ` {}`, `trailing data`},
		{"null means empty object", `null`, `missing required field "home"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeArguments[sampleToolArgs](json.RawMessage(tt.raw))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if got.Query != "go" {
					t.Fatalf("decoded %+v", got)
				}
				return
			}
			var te *ToolError
			if !errors.As(err, &te) || te.Kind != ToolErrorInvalidArguments {
				t.Fatalf("error %v (%T), want *ToolError of kind invalid_arguments", err, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "invalid tool arguments: ") {
				t.Fatalf("error text %q lacks the model-visible prefix", err)
			}
		})
	}
}

func TestDecodeArgumentsFullValues(t *testing.T) {
	got, err := DecodeArguments[sampleToolArgs](json.RawMessage(`{"query":"go","home":{"street":"s","city":"c"},
		"verbose":true,"count":"12","timeout":"2s","blob":"aGk=","pair":[1,2],"note":"n","extra":{"b":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 12 || got.Timeout.D() != 2*time.Second || string(got.Blob) != "hi" || got.Pair != [2]int{1, 2} ||
		got.Note != "n" || string(got.Extra) != `{"b":1}` || !got.Verbose {
		t.Fatalf("decoded %+v", got)
	}
}

func TestDecodeArgumentsNullMeansEmptyObject(t *testing.T) {
	for _, raw := range []string{"", "null", "  null  ", "{}"} {
		t.Run("raw="+raw, func(t *testing.T) {
			got, err := DecodeArguments[optionalArgs](json.RawMessage(raw))
			if err != nil || got != (optionalArgs{}) {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
	if _, err := DecodeArguments[requiredArgs](nil); err == nil || !strings.Contains(err.Error(), `missing required field "count"`) {
		t.Fatalf("null arguments for required fields: %v", err)
	}
	p, err := DecodeArguments[*optionalArgs](json.RawMessage(`{"text":"x"}`))
	if err != nil || p == nil || p.Text != "x" {
		t.Fatalf("pointer type: %+v, %v", p, err)
	}
}
