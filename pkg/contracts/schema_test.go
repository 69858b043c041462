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
