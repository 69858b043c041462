package typeschema

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
	if _, err := OfType(nodeType, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("without an override: err = %v, want ErrUnsupported", err)
	}
	root := true
	m, err := OfType(nodeType, Options{Override: func(rt reflect.Type) (map[string]any, bool) {
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
	m, err := OfType(reflect.TypeFor[docNode](), Options{TagKey: "yaml", Override: func(reflect.Type) (map[string]any, bool) {
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

// strictPolicy has a custom UnmarshalJSON (defaults, strictness), as the vocabulary's
// strictPolicy has.
type strictPolicy struct {
	Mode        string `json:"mode"`
	MaxAttempts uint16 `json:"max_attempts"`
}

func (p *strictPolicy) UnmarshalJSON([]byte) error { return nil }

// A struct with a custom UnmarshalJSON: tool arguments refuse such a type, a document
// describes it by its fields.
func TestSchemaOfTypeDescribesAStructWithCustomDecoderByItsFields(t *testing.T) {
	m, err := OfType(reflect.TypeFor[strictPolicy](), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{"max_attempts":{"maximum":65535,"minimum":0,"type":"integer"},"mode":{"type":"string"}},"required":["max_attempts","mode"],"type":"object"}`
	if got := renderDoc(t, m); got != want {
		t.Fatalf("schema\n got %s\nwant %s", got, want)
	}
	type args struct {
		Policy strictPolicy `json:"policy"`
	}
	if _, err := For[args](); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("tool arguments with a custom decoder: err = %v, want ErrUnsupported", err)
	}
}
