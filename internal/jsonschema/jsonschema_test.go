package jsonschema

import (
	"errors"
	"testing"
)

const wcSchema = `{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["text"],"additionalProperties":false}`

func TestValidate_reportsTheOffendingField(t *testing.T) {
	s, err := Compile([]byte(wcSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, doc, field string
	}{
		{"wrong type", `{"text":5}`, "/text"},
		{"missing required", `{}`, ""},
		{"below minimum", `{"text":"a","n":0}`, "/n"},
		{"unknown property", `{"text":"a","x":1}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.Validate([]byte(c.doc))
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Validate(%s) = %v, want a *ValidationError", c.doc, err)
			}
			if verr.Field != c.field || verr.Message == "" {
				t.Fatalf("Validate(%s): field %q message %q, want field %q", c.doc, verr.Field, verr.Message, c.field)
			}
		})
	}
	if err := s.Validate([]byte(`{"text":"hello","n":3}`)); err != nil {
		t.Fatalf("valid document refused: %v", err)
	}
	if err := s.Validate([]byte(`{"text":`)); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("truncated JSON: %v, want ErrInvalidJSON", err)
	}
}

func TestCompile_refusesBadSchemasAndOutsideReferences(t *testing.T) {
	for _, schema := range []string{`{"type":12}`, `not json`, `{"$ref":"https://example.com/x.json"}`, `{"$ref":"/etc/passwd"}`} {
		if _, err := Compile([]byte(schema)); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("Compile(%s) = %v, want ErrInvalidSchema", schema, err)
		}
	}
}

func TestCompileSet_resolvesReferencesBetweenDocuments(t *testing.T) {
	docs := map[string][]byte{
		"common.json": []byte(`{"$defs":{"id":{"type":"string","pattern":"^[a-z]+$"}}}`),
		"batch.json":  []byte(`{"type":"object","properties":{"batch_id":{"$ref":"common.json#/$defs/id"}}}`),
	}
	s, err := CompileSet("batch.json", docs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(`{"batch_id":"abc"}`)); err != nil {
		t.Fatalf("valid: %v", err)
	}
	var verr *ValidationError
	if err := s.Validate([]byte(`{"batch_id":"A B"}`)); !errors.As(err, &verr) || verr.Field != "/batch_id" {
		t.Fatalf("invalid id: %v", err)
	}
}
