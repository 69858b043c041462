package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

type sampleAddress struct {
	Street string `json:"street" desc:"Street and number."`
	City   string `json:"city"`
}

type sampleEmbedded struct {
	Note string `json:"note,omitempty" desc:"A free note, with commas."`
}

// sampleToolArgs is the argument type of a realistic typed tool; its schema is pinned by
// testdata/golden/schema_sample_tool.json.
type sampleToolArgs struct {
	Query   string            `json:"query" jsonschema:"description=What to search for\\, in plain words,minLength=1,maxLength=200"`
	Mode    string            `json:"mode,omitempty" jsonschema:"enum=fast|thorough,default=fast"`
	Limit   int               `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50"`
	Ratio   float64           `json:"ratio,omitempty" jsonschema:"exclusiveMinimum=0,maximum=1"`
	Tags    []string          `json:"tags,omitempty" jsonschema:"enum=a|b|c,uniqueItems,maxItems=3"`
	Labels  map[string]string `json:"labels,omitempty"`
	Address *sampleAddress    `json:"address,omitempty" desc:"Where to deliver the result."`
	Home    sampleAddress     `json:"home"`
	Since   time.Time         `json:"since,omitzero"`
	Extra   json.RawMessage   `json:"extra,omitempty"`
	Verbose bool              `json:"verbose"`
	Level   uint8             `json:"level,omitempty"`
	Count   int64             `json:"count,string,omitempty"`
	Timeout Duration          `json:"timeout,omitempty"`
	Blob    []byte            `json:"blob,omitempty"`
	Pair    [2]int            `json:"pair,omitempty"`
	Code    string            `json:"code,omitempty" jsonschema:"pattern=^[A-Z]{3}$"`
	sampleEmbedded
	ignored string // unexported: proves such fields are skipped
	Skip    string `json:"-"`
}

func (sampleToolArgs) ToolID() string          { return "search" }
func (sampleToolArgs) ToolDescription() string { return "Search the corpus." }

type optionalArgs struct {
	Text string `json:"text,omitempty"`
}

type requiredArgs struct {
	Text  string `json:"text"`
	Count int    `json:"count"`
}

type recursiveArgs struct {
	Children []recursiveArgs `json:"children"`
}

type chanArgs struct {
	C chan int `json:"c"`
}

type intKeyArgs struct {
	M map[int]string `json:"m"`
}

type customUnmarshal struct{ v string }

func (c *customUnmarshal) UnmarshalJSON(b []byte) error { c.v = string(b); return nil }

type customArgs struct {
	C customUnmarshal `json:"c"`
}

type providedType struct{ v string }

func (p *providedType) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &p.v) }
func (providedType) JSONSchema() json.RawMessage {
	return json.RawMessage(`{"type":"string","format":"uuid"}`)
}

type providedArgs struct {
	ID providedType `json:"id" desc:"The record id."`
}

type badTagArgs struct {
	X string `json:"x" jsonschema:"descripton=typo"`
}

type enumOnStructArgs struct {
	X sampleAddress `json:"x" jsonschema:"enum=a|b"`
}

type minOnStringArgs struct {
	X string `json:"x" jsonschema:"minimum=1"`
}

type badPatternArgs struct {
	X string `json:"x" jsonschema:"pattern=(["`
}

type badEnumArgs struct {
	X int `json:"x" jsonschema:"enum=1|two"`
}

type EmbeddedA struct {
	Name string `json:"name"`
	Both string `json:"both"`
}

type EmbeddedB struct {
	Both string `json:"both"`
}

type embeddingArgs struct {
	EmbeddedA
	*EmbeddedB
	Own string `json:"own"`
}

func TestSampleToolSchemaGolden(t *testing.T) {
	schema, err := SchemaFor[sampleToolArgs]()
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, schema, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	checkGolden(t, "schema_sample_tool.json", pretty.Bytes())
	for _, forbidden := range []string{`"title"`, `"$ref"`, `"definitions"`, `"ignored"`, `"Skip"`, `"sampleEmbedded"`} {
		if bytes.Contains(schema, []byte(forbidden)) {
			t.Errorf("schema contains %s", forbidden)
		}
	}
	var top struct {
		Type                 string         `json:"type"`
		AdditionalProperties *bool          `json:"additionalProperties"`
		Required             []string       `json:"required"`
		Properties           map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(schema, &top); err != nil {
		t.Fatal(err)
	}
	if top.Type != "object" || top.AdditionalProperties == nil || *top.AdditionalProperties {
		t.Fatalf("top level is not a closed object: %s", schema)
	}
	if got, want := strings.Join(top.Required, ","), "home,query,verbose"; got != want {
		t.Fatalf("required = %s, want %s", got, want)
	}
	if _, ok := top.Properties["note"]; !ok {
		t.Fatal("embedded field note was not flattened")
	}
}

func TestDescriptorOfTypedTool(t *testing.T) {
	d, err := DescriptorOf[sampleToolArgs]()
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := SchemaFor[sampleToolArgs]()
	if d.ID != "search" || d.Description != "Search the corpus." || d.Kind != KindRegular ||
		d.RecoveryPolicy != DefaultRecoveryPolicy() || !bytes.Equal(d.Parameters, schema) {
		t.Fatalf("descriptor = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	d2 := d.WithKind(KindDelegation).WithRecoveryPolicy(DurableRequestPolicy())
	if d2.Kind != KindDelegation || d2.RecoveryPolicy != DurableRequestPolicy() || d.Kind != KindRegular {
		t.Fatalf("With* did not copy: %+v / %+v", d, d2)
	}
	if _, err := DescriptorFor[sampleToolArgs]("bad\x00id", "x"); !errors.Is(err, ErrInvalidDescriptor) || !errors.Is(err, ErrInvalidToolID) {
		t.Fatalf("bad id accepted: %v", err)
	}
	if _, err := DescriptorFor[recursiveArgs]("r", "x"); !errors.Is(err, ErrUnsupportedSchema) {
		t.Fatalf("recursive type accepted: %v", err)
	}
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

func TestSchemaDerivationFailures(t *testing.T) {
	tests := []struct {
		name   string
		schema func() (json.RawMessage, error)
		decode func() error
		want   string
	}{
		{"recursive", SchemaFor[recursiveArgs], func() error { _, err := DecodeArguments[recursiveArgs](nil); return err }, "recursive type"},
		{"channel", SchemaFor[chanArgs], func() error { _, err := DecodeArguments[chanArgs](nil); return err }, "has no JSON form"},
		{"int map keys", SchemaFor[intKeyArgs], func() error { _, err := DecodeArguments[intKeyArgs](nil); return err }, "is not a string"},
		{"custom unmarshal", SchemaFor[customArgs], func() error { _, err := DecodeArguments[customArgs](nil); return err }, "implement SchemaProvider"},
		{"unknown tag keyword", SchemaFor[badTagArgs], func() error { _, err := DecodeArguments[badTagArgs](nil); return err }, `unknown jsonschema keyword "descripton"`},
		{"enum on struct", SchemaFor[enumOnStructArgs], func() error { _, err := DecodeArguments[enumOnStructArgs](nil); return err }, "need a scalar field"},
		{"minimum on string", SchemaFor[minOnStringArgs], func() error { _, err := DecodeArguments[minOnStringArgs](nil); return err }, "needs a numeric field"},
		{"bad pattern", SchemaFor[badPatternArgs], func() error { _, err := DecodeArguments[badPatternArgs](nil); return err }, "pattern"},
		{"bad enum value", SchemaFor[badEnumArgs], func() error { _, err := DecodeArguments[badEnumArgs](nil); return err }, `"two" is not an integer`},
		{"not an object", SchemaFor[[]string], func() error { _, err := DecodeArguments[[]string](nil); return err }, "must be a JSON object"},
		{"scalar", SchemaFor[string], func() error { _, err := DecodeArguments[string](nil); return err }, "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.schema()
			if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("SchemaFor error %v, want ErrUnsupportedSchema containing %q", err, tt.want)
			}
			var te *ToolError
			if derr := tt.decode(); !errors.As(derr, &te) || te.Kind != ToolErrorExecution {
				t.Fatalf("DecodeArguments error %v, want an execution error (the tool author's fault)", derr)
			}
		})
	}
}

func TestSchemaProviderAndEmbedding(t *testing.T) {
	schema, err := SchemaFor[providedArgs]()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"additionalProperties":false,"properties":{"id":{"description":"The record id.","format":"uuid","type":"string"}},"required":["id"],"type":"object"}`; string(schema) != want {
		t.Fatalf("schema\n got %s\nwant %s", schema, want)
	}
	if got, err := DecodeArguments[providedArgs](json.RawMessage(`{"id":"abc"}`)); err != nil || got.ID.v != "abc" {
		t.Fatalf("decode: %+v, %v", got, err)
	}

	schema, err = SchemaFor[embeddingArgs]()
	if err != nil {
		t.Fatal(err)
	}
	// "both" is ambiguous at one depth and untagged-tie, so encoding/json drops it.
	if want := `{"additionalProperties":false,"properties":{"name":{"type":"string"},"own":{"type":"string"}},"required":["name","own"],"type":"object"}`; string(schema) != want {
		t.Fatalf("schema\n got %s\nwant %s", schema, want)
	}
}

func TestSchemaForIsCachedAndCopied(t *testing.T) {
	first, err := SchemaFor[sampleToolArgs]()
	if err != nil {
		t.Fatal(err)
	}
	first[0] = 'X'
	var wg sync.WaitGroup
	results := make([]json.RawMessage, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = SchemaFor[sampleToolArgs]()
		}()
	}
	wg.Wait()
	for i, r := range results {
		if len(r) == 0 || r[0] != '{' || !bytes.Equal(r, results[0]) {
			t.Fatalf("result %d differs or was corrupted by a caller: %.40s", i, r)
		}
	}
}

func TestToolDescriptorJSONAndValidate(t *testing.T) {
	var d ToolDescriptor
	if err := json.Unmarshal([]byte(`{"id":"echo","description":"Echo.","parameters":{"type":"object","properties":{}}}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Kind != KindRegular || d.RecoveryPolicy != DefaultRecoveryPolicy() {
		t.Fatalf("defaults not applied: %+v", d)
	}
	if err := json.Unmarshal([]byte(`{"id":"echo","parameters":{},"kind":"regular","extra":1}`), &d); err == nil {
		t.Fatal("unknown descriptor field accepted")
	}
	if err := json.Unmarshal([]byte(`{"id":"echo","parameters":{},"recovery_policy":{"max_attempts":0}}`), &d); !errors.Is(err, ErrZeroAttempts) {
		t.Fatalf("zero attempts in descriptor: %v", err)
	}
	good := ToolDescriptor{ID: "mcp__github__create_issue", Description: "x", Parameters: json.RawMessage(`{"type":"object"}`),
		Kind: KindRegular, RecoveryPolicy: DefaultRecoveryPolicy()}
	tests := []struct {
		name string
		mod  func(*ToolDescriptor)
		ok   bool
	}{
		{"good", func(*ToolDescriptor) {}, true},
		{"empty id", func(d *ToolDescriptor) { d.ID = "" }, false},
		{"array parameters", func(d *ToolDescriptor) { d.Parameters = json.RawMessage(`{"type":"array"}`) }, false},
		{"untyped parameters", func(d *ToolDescriptor) { d.Parameters = json.RawMessage(`{"properties":{}}`) }, false},
		{"invalid parameters", func(d *ToolDescriptor) { d.Parameters = json.RawMessage(`{`) }, false},
		{"unknown kind", func(d *ToolDescriptor) { d.Kind = "advisor" }, false},
		{"zero policy", func(d *ToolDescriptor) { d.RecoveryPolicy = ToolRecoveryPolicy{} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good
			tt.mod(&d)
			err := d.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidDescriptor) {
				t.Fatalf("error %v does not wrap ErrInvalidDescriptor", err)
			}
		})
	}
}

func TestNormalizeParameters(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"properties":{"a":{"type":"string"}},"type":"object"}`, true},
		{`{}`, `{"properties":{},"type":"object"}`, true},
		{``, `{"properties":{},"type":"object"}`, true},
		{`null`, `{"properties":{},"type":"object"}`, true},
		{`{"properties":{"n":{"type":"integer","maximum":1e3}}}`, `{"properties":{"n":{"maximum":1e3,"type":"integer"}},"type":"object"}`, true},
		{`{"type":"string"}`, ``, false},
		{`{"type":["object","null"]}`, ``, false},
		{`[]`, ``, false},
		{`{} {}`, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := NormalizeParameters(json.RawMessage(tt.in))
			if (err == nil) != tt.ok || (tt.ok && string(got) != tt.want) {
				t.Fatalf("got %s, %v; want %s ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestValidateToolID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"echo", true},
		{"mcp__github__create_issue", true},
		{"Bash", true},
		{"fs.read", true},
		{"ünïcode", true},
		{strings.Repeat("x", 200), true},
		{strings.Repeat("x", 201), false},
		{"", false},
		{"tab\there", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"zero\u200bwidth", false},
		{"bidi\u202eoverride", false},
		{"line\u2028sep", false},
		{"bad\xffutf8", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			err := ValidateToolID(tt.id)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateToolID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidToolID) {
				t.Fatalf("error %v does not wrap ErrInvalidToolID", err)
			}
		})
	}
}
