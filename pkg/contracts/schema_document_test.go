package contracts

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

type docNode struct {
	Name     string    `json:"name" yaml:"title"`
	Children []docNode `json:"children,omitempty" yaml:"kids"`
}

func renderDoc(t *testing.T, m map[string]any) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A recursive type cannot be inlined (tool arguments refuse it); a document describes it
// through the override, which turns the inner use into a $ref.
func TestSchemaOfTypeOverrideMakesRecursionExpressible(t *testing.T) {
	nodeType := reflect.TypeFor[docNode]()
	if _, err := SchemaOfType(nodeType, SchemaOptions{}); !errors.Is(err, ErrUnsupportedSchema) {
		t.Fatalf("without an override: err = %v, want ErrUnsupportedSchema", err)
	}
	root := true
	m, err := SchemaOfType(nodeType, SchemaOptions{Override: func(rt reflect.Type) (map[string]any, bool) {
		if rt == nodeType && !root {
			return map[string]any{"$ref": "node.json"}, true
		}
		root = false
		return nil, false
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{"children":{"items":{"$ref":"node.json"},"type":"array"},"name":{"type":"string"}},"required":["name"],"type":"object"}`
	if got := renderDoc(t, m); got != want {
		t.Fatalf("schema\n got %s\nwant %s", got, want)
	}
}

func TestSchemaOfTypeTagKeyNamesTheFields(t *testing.T) {
	root := true
	m, err := SchemaOfType(reflect.TypeFor[docNode](), SchemaOptions{TagKey: "yaml", Override: func(reflect.Type) (map[string]any, bool) {
		if root {
			root = false
			return nil, false
		}
		return map[string]any{}, true
	}})
	if err != nil {
		t.Fatal(err)
	}
	props := m["properties"].(map[string]any)
	if _, ok := props["title"]; !ok {
		t.Fatalf("yaml names not used: %v", props)
	}
	if _, ok := props["kids"]; !ok {
		t.Fatalf("yaml names not used: %v", props)
	}
}

// ToolRecoveryPolicy has a custom UnmarshalJSON (defaults, strictness): tool arguments
// refuse such a type, a document describes it by its fields.
func TestSchemaOfTypeDescribesAStructWithCustomDecoderByItsFields(t *testing.T) {
	m, err := SchemaOfType(reflect.TypeFor[ToolRecoveryPolicy](), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{"max_attempts":{"maximum":65535,"minimum":0,"type":"integer"},"mode":{"type":"string"}},"required":["max_attempts","mode"],"type":"object"}`
	if got := renderDoc(t, m); got != want {
		t.Fatalf("schema\n got %s\nwant %s", got, want)
	}
	type args struct {
		Policy ToolRecoveryPolicy `json:"policy"`
	}
	if _, err := SchemaFor[args](); !errors.Is(err, ErrUnsupportedSchema) {
		t.Fatalf("tool arguments with a custom decoder: err = %v, want ErrUnsupportedSchema", err)
	}
}
