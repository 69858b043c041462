package toolreg

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/sampleargs"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// sampleToolArgs is the argument type of a realistic typed tool (the one pkg/contracts'
// and the schema derivation's tests check): every kind of field the schema derivation knows.
type sampleToolArgs = sampleargs.ToolArgs[contracts.Duration]

type optionalArgs struct {
	Text string `json:"text,omitempty"`
}

type requiredArgs struct {
	Text  string `json:"text"`
	Count int    `json:"count"`
}

// providedID describes itself (typeschema.Provider); its schema is checked like any other.
type providedID struct{ v string }

func (p *providedID) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &p.v) }
func (providedID) JSONSchema() json.RawMessage {
	return json.RawMessage(`{"type":"string","minLength":3}`)
}

type providedArgs struct {
	ID providedID `json:"id"`
}

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
		{"unknown field", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"querry":"x"}`, `(arguments): additional properties 'querry' not allowed`},
		{"key case differs", `{"Query":"go","query":"go","home":{"street":"s","city":"c"},"verbose":true}`, `(arguments): additional properties 'Query' not allowed`},
		{"nested unknown field", `{"query":"go","home":{"street":"s","city":"c","zip":"1"},"verbose":true}`, `/home: additional properties 'zip' not allowed`},
		{"missing required", `{"home":{"street":"s","city":"c"},"verbose":true}`, `(arguments): missing property 'query'`},
		{"missing nested required", `{"query":"go","home":{"street":"s"},"verbose":true}`, `/home: missing property 'city'`},
		{"required null", `{"query":null,"home":{"street":"s","city":"c"},"verbose":true}`, `/query: got null, want string`},
		{"wrong type", `{"query":5,"home":{"street":"s","city":"c"},"verbose":true}`, `/query: got number, want string`},
		{"wrong nested type", `{"query":"go","home":{"street":1,"city":"c"},"verbose":true}`, `/home/street: got number, want string`},
		{"bool as string", `{"query":"go","home":{"street":"s","city":"c"},"verbose":"yes"}`, `/verbose: got string, want boolean`},
		{"enum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"mode":"slow"}`, `/mode: value must be one of 'fast', 'thorough'`},
		{"item enum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"tags":["a","z"]}`, `/tags/1: value must be one of 'a', 'b', 'c'`},
		{"unique items", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"tags":["a","a"]}`, `/tags: items at 0 and 1 are equal`},
		{"max items", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"tags":["a","b","c","a"]}`, `/tags: maxItems: got 4, want 3`},
		{"minimum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"limit":0}`, `/limit: minimum: got 0, want 1`},
		{"maximum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"limit":51}`, `/limit: maximum: got 51, want 50`},
		{"exclusive minimum", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"ratio":0}`, `/ratio: exclusiveMinimum: got 0, want 0`},
		{"integer with fraction", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"limit":1.5}`, `/limit: got number, want integer`},
		{"uint8 overflow", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"level":256}`, `/level: maximum: got 256, want 255`},
		{"negative uint", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"level":-1}`, `/level: minimum: got -1, want 0`},
		{"string option wants a string", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"count":12}`, `/count: got number, want string`},
		{"min length", `{"query":"","home":{"street":"s","city":"c"},"verbose":true}`, `/query: minLength: got 0, want 1`},
		{"pattern", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"code":"abc"}`, `/code: 'abc' does not match pattern '^[A-Z]{3}$'`},
		{"array length", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"pair":[1]}`, `/pair: minItems: got 1, want 2`},
		{"map value type", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"labels":{"k":1}}`, `/labels/k: got number, want string`},
		{"bad time", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"since":"yesterday"}`, `invalid tool arguments: `},
		{"bad duration", `{"query":"go","home":{"street":"s","city":"c"},"verbose":true,"timeout":"soon"}`, `invalid tool arguments: `},
		{"not an object", `["go"]`, `(arguments): got array, want object`},
		{"not json", `{"query":`, `arguments are not valid JSON`},
		{"trailing data", valid + ` {}`, `trailing data`},
		{"null means empty object", `null`, `(arguments): missing properties 'home', 'query', 'verbose'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeArguments[sampleToolArgs](json.RawMessage(tt.raw))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if got.Query != "go" {
					t.Fatalf("decoded %+v", got)
				}
				return
			}
			var te *contracts.ToolError
			if !errors.As(err, &te) || te.Kind != contracts.ToolErrorInvalidArguments {
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
	got, err := decodeArguments[sampleToolArgs](json.RawMessage(`{"query":"go","home":{"street":"s","city":"c"},
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
			got, err := decodeArguments[optionalArgs](json.RawMessage(raw))
			if err != nil || got != (optionalArgs{}) {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
	if _, err := decodeArguments[requiredArgs](nil); err == nil || !strings.Contains(err.Error(), `missing properties 'count', 'text'`) {
		t.Fatalf("null arguments for required fields: %v", err)
	}
	p, err := decodeArguments[*optionalArgs](json.RawMessage(`{"text":"x"}`))
	if err != nil || p == nil || p.Text != "x" {
		t.Fatalf("pointer type: %+v, %v", p, err)
	}
}

// A type whose schema cannot be derived is the tool author's fault: the call fails as an
// execution error, not as the model's invalid arguments.
func TestDecodeArgumentsUnderivableSchemaIsAnExecutionError(t *testing.T) {
	_, err := decodeArguments[sampleargs.Recursive](nil)
	var te *contracts.ToolError
	if !errors.As(err, &te) || te.Kind != contracts.ToolErrorExecution || !strings.Contains(err.Error(), "recursive type") {
		t.Fatalf("error %v, want an execution error naming the recursive type", err)
	}
}

// A type that describes itself is held to the schema it gave.
func TestDecodeArgumentsChecksAProvidedSchema(t *testing.T) {
	if got, err := decodeArguments[providedArgs](json.RawMessage(`{"id":"abcd"}`)); err != nil || got.ID.v != "abcd" {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	if _, err := decodeArguments[providedArgs](json.RawMessage(`{"id":"ab"}`)); err == nil || !strings.Contains(err.Error(), "/id") {
		t.Fatalf("a value outside the provided schema: %v", err)
	}
}

// FuzzDecodeArguments checks that argument decoding never panics, fails only with an
// invalid_arguments *ToolError, and that what it accepts re-encodes to arguments it accepts
// again.
func FuzzDecodeArguments(f *testing.F) {
	for _, s := range []string{
		`{"query":"go","home":{"street":"s","city":"c"},"verbose":true}`,
		`{"query":"go","mode":"thorough","limit":5,"ratio":0.5,"tags":["a"],"labels":{"k":"v"},"home":{"street":"s","city":"c"},"verbose":false,"level":3,"count":"7","pair":[1,2],"code":"ABC","note":"n","extra":[null]}`,
		`null`, ``, `[]`, `{"query":1}`, `{"Query":"x"}`, `{"limit":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeArguments[sampleToolArgs](data)
		if err != nil {
			var te *contracts.ToolError
			if !errors.As(err, &te) || te.Kind != contracts.ToolErrorInvalidArguments {
				t.Fatalf("error %v (%T) is not an invalid_arguments *ToolError", err, err)
			}
			return
		}
		again, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := decodeArguments[sampleToolArgs](again); err != nil {
			t.Fatalf("re-encoded arguments rejected: %v\n%s", err, again)
		}
	})
}
