package typeschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// Options steer [OfType] when it derives the schema of a protocol document (a
// CloudEvent payload, a request body, a configuration file) instead of a tool's arguments.
type Options struct {
	// Override returns the schema of a type as is (for example {"$ref": "other.json"} for a
	// type that has a document of its own, or an enum of a named string type); ok false
	// derives it by reflection. It is asked for every type met, the root included.
	Override func(t reflect.Type) (schema map[string]any, ok bool)
	// TagKey names the struct tag that names the fields ("json" when empty; "yaml" for a
	// YAML document).
	TagKey string
}

// OfType derives the JSON Schema of t's JSON form by the rules of [For], with
// two differences that a document needs and tool arguments must not have: opts.Override
// may replace any type (which is how documents reference each other and how recursive
// types become expressible), and a struct with a custom UnmarshalJSON is described by its
// fields. The result is rendered with sorted keys; it carries no $schema or $id.
func OfType(t reflect.Type, opts Options) (map[string]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	b := &schemaBuilder{inProgress: map[reflect.Type]bool{}, doc: &opts}
	node, err := b.build(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, t, err)
	}
	raw, err := Marshal(node.render())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, t, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep bounds such as 65535 exact
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, t, err)
	}
	return m, nil
}
