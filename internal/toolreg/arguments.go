package toolreg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/jsonschema"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
)

// This file decodes a call's raw arguments into a typed tool's parameters. They are checked
// first against the schema derived from the type (the one the model was shown) by
// internal/jsonschema, the validator that also checks configured, MCP and edited
// arguments, so every kind of tool reports a wrong field the same way.

// decodeArguments decodes a call's raw arguments into T. JSON null or empty arguments mean
// {}. The value must then satisfy T's derived schema (see [typeschema.For]): no unknown
// field (names match exactly, not case-insensitively), every required field present and not
// null, every value of the right type and within its declared constraints; and it must
// decode strictly into T. Any such failure is a [*contracts.ToolError] of kind
// [contracts.ToolErrorInvalidArguments] naming the field, which the model sees as "invalid
// tool arguments: …". A T whose schema cannot be derived or compiled is the tool author's
// fault, not the model's, and yields kind [contracts.ToolErrorExecution].
//
// An optional field may be null, which means absent: models send null for a field they
// leave out, and encoding/json reads it as the zero value. Such fields are dropped before the
// check, since the schema (which describes the field's type, not null) would refuse them.
func decodeArguments[T any](raw json.RawMessage) (T, error) {
	var zero T
	cs := argSchemaOf(reflect.TypeFor[T]())
	if cs.err != nil {
		return zero, contracts.ExecutionFailed("tool argument schema: " + cs.err.Error())
	}
	data := bytes.TrimSpace(raw)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return zero, contracts.InvalidArguments("arguments are not valid JSON: " + err.Error())
	}
	if _, err := dec.Token(); err == nil {
		return zero, contracts.InvalidArguments("arguments have trailing data after the JSON value")
	}
	dropNullOptionals(v, cs.doc)
	checked, err := json.Marshal(v) // json.Number keeps every number's text exact
	if err != nil {
		return zero, contracts.InvalidArguments("arguments are not valid JSON: " + err.Error())
	}
	if err := config.ValidateAgainst(cs.schema, checked); err != nil {
		return zero, err
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	var out T
	if err := strict.Decode(&out); err != nil {
		return zero, contracts.InvalidArguments(contracts.DescribeDecodeError(err))
	}
	return out, nil
}

// argSchemaCache memoises the compiled argument schema by type. It is a pure cache: entries
// are deterministic functions of the type.
var argSchemaCache sync.Map // reflect.Type → *argSchema

// argSchema is a type's derived schema, compiled, and its document (to find the optional
// fields).
type argSchema struct {
	schema *jsonschema.Schema
	doc    map[string]any
	err    error
}

func argSchemaOf(t reflect.Type) *argSchema {
	if v, ok := argSchemaCache.Load(t); ok {
		return v.(*argSchema)
	}
	cs := &argSchema{}
	cs.schema, cs.doc, cs.err = compileArgSchema(t)
	v, _ := argSchemaCache.LoadOrStore(t, cs)
	return v.(*argSchema)
}

func compileArgSchema(t reflect.Type) (*jsonschema.Schema, map[string]any, error) {
	raw, err := typeschema.ForType(t)
	if err != nil {
		return nil, nil, err
	}
	schema, err := jsonschema.Compile(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", t, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", t, err)
	}
	return schema, doc, nil
}

// dropNullOptionals deletes, in every object of v that schema describes by its properties,
// the members that are null and not required; it follows properties, items and
// additionalProperties down.
func dropNullOptionals(v any, schema map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		required := map[string]bool{}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		additional, _ := schema["additionalProperties"].(map[string]any)
		for k, val := range x {
			if p, ok := props[k].(map[string]any); ok {
				if val == nil && !required[k] {
					delete(x, k)
					continue
				}
				dropNullOptionals(val, p)
			} else if additional != nil {
				dropNullOptionals(val, additional)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for _, item := range x {
				dropNullOptionals(item, items)
			}
		}
	}
}
