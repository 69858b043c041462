package schemas

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/awaken-dev/awaken/internal/jsonschema"
)

// TestAsyncAPIIsValidAsyncAPI3 validates docs/asyncapi.yaml against the official AsyncAPI
// 3.0.0 JSON Schema (testdata/asyncapi-3.0.0.json: schemas/3.0.0-without-$id.json of
// github.com/asyncapi/spec-json-schemas, Apache-2.0, minified), so the document is one any
// AsyncAPI tool reads.
func TestAsyncAPIIsValidAsyncAPI3(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("testdata", "asyncapi-3.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := jsonschema.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "asyncapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	asJSON, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(asJSON); err != nil {
		t.Fatalf("docs/asyncapi.yaml is not a valid AsyncAPI 3.0.0 document: %s", failure(err))
	}
}
