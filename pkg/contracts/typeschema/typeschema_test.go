package typeschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/awaken-dev/awaken/internal/goldentest"
	"github.com/awaken-dev/awaken/internal/sampleargs"
)

// sampleToolArgs is the realistic typed tool that pkg/contracts' and internal/toolreg's
// tests check too; its schema is pinned by testdata/golden/sample_tool.json.
type sampleToolArgs = sampleargs.ToolArgs[textDuration]

// textDuration stands for contracts.Duration (which this leaf cannot import): a type with
// custom decoders that describes itself as a string.
type textDuration int64

func (d *textDuration) UnmarshalJSON([]byte) error { return nil }
func (textDuration) JSONSchema() json.RawMessage   { return json.RawMessage(`{"type":"string"}`) }

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
	X sampleargs.Address `json:"x" jsonschema:"enum=a|b"`
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
	schema, err := For[sampleToolArgs]()
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, schema, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	goldentest.Check(t, filepath.Join("testdata", "golden", "sample_tool.json"), pretty.Bytes())
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
		want   string
	}{
		{"recursive", For[sampleargs.Recursive], "recursive type"},
		{"channel", For[chanArgs], "has no JSON form"},
		{"int map keys", For[intKeyArgs], "is not a string"},
		{"custom unmarshal", For[customArgs], "implement Provider"},
		{"unknown tag keyword", For[badTagArgs], `unknown jsonschema keyword "descripton"`},
		{"enum on struct", For[enumOnStructArgs], "need a scalar field"},
		{"minimum on string", For[minOnStringArgs], "needs a numeric field"},
		{"bad pattern", For[badPatternArgs], "pattern"},
		{"bad enum value", For[badEnumArgs], `"two" is not an integer`},
		{"not an object", For[[]string], "must be a JSON object"},
		{"scalar", For[string], "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.schema()
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("For error %v, want ErrUnsupported containing %q", err, tt.want)
			}
		})
	}
}

func TestSchemaProviderAndEmbedding(t *testing.T) {
	schema, err := For[providedArgs]()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"additionalProperties":false,"properties":{"id":{"description":"The record id.","format":"uuid","type":"string"}},"required":["id"],"type":"object"}`; string(schema) != want {
		t.Fatalf("schema\n got %s\nwant %s", schema, want)
	}

	schema, err = For[embeddingArgs]()
	if err != nil {
		t.Fatal(err)
	}
	// "both" is ambiguous at one depth and untagged-tie, so encoding/json drops it.
	if want := `{"additionalProperties":false,"properties":{"name":{"type":"string"},"own":{"type":"string"}},"required":["name","own"],"type":"object"}`; string(schema) != want {
		t.Fatalf("schema\n got %s\nwant %s", schema, want)
	}
}

func TestSchemaForIsCachedAndCopied(t *testing.T) {
	first, err := For[sampleToolArgs]()
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
			results[i], _ = For[sampleToolArgs]()
		}()
	}
	wg.Wait()
	for i, r := range results {
		if len(r) == 0 || r[0] != '{' || !bytes.Equal(r, results[0]) {
			t.Fatalf("result %d differs or was corrupted by a caller: %.40s", i, r)
		}
	}
}
