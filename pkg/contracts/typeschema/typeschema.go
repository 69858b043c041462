// Package typeschema derives the JSON Schema (a 2020-12 subset) of a Go type by
// reflection: the parameters schema a typed tool advertises ([For]) and the schemas of the
// protocol documents checked in under schemas/ ([OfType]). It derives only; checking a value
// against a schema is internal/jsonschema's, the one validator of the module, so the schema
// a model sees is checked by the same engine whichever way the tool is defined.
//
// It is a leaf of pkg/contracts and, like it, uses only the standard library.
package typeschema

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// ErrUnsupported is wrapped when a Go type cannot be described by an inlined JSON Schema
// (channels, functions, recursive types, non-string map keys, types with a custom
// UnmarshalJSON that do not implement [Provider], malformed tags).
var ErrUnsupported = errors.New("cannot derive a JSON schema")

// Provider lets a type describe itself when reflection cannot (for example a type with a
// custom UnmarshalJSON, such as contracts.Duration). JSONSchema must return a JSON object;
// it is inlined as is.
type Provider interface {
	JSONSchema() json.RawMessage
}

// For returns the JSON Schema of T's JSON form, derived by reflection and cached per
// type (safe for concurrent use; the returned slice is the caller's own).
//
// Rules: T must be a struct, a pointer to one, or a map with string keys. A struct is an
// object with "additionalProperties": false whose properties are its JSON fields (json tag
// names, embedded structs flattened as encoding/json does). A field is required unless it
// has omitempty or omitzero, is a pointer, or is promoted through an embedded pointer; the
// tag `jsonschema:"required"` or `jsonschema:"optional"` overrides that. Field keywords
// come from `jsonschema:"description=…,enum=a|b,default=…,minimum=…,maximum=…,
// exclusiveMinimum=…,exclusiveMaximum=…,minLength=…,maxLength=…,pattern=…,format=…,
// minItems=…,maxItems=…,uniqueItems"` (a literal comma is written \,) or a `desc:"…"` tag;
// on a slice of scalars the value keywords apply to its items. Types: string, bool, all
// integers (sized ones bounded), floats, slices and arrays, []byte (base64 string), maps
// with string keys, nested structs (inlined), time.Time (date-time string),
// json.RawMessage and interface{} (any value), encoding.TextUnmarshaler
// (string) and [Provider]. Patterns use Go (RE2) syntax.
func For[T any]() (json.RawMessage, error) { return ForType(reflect.TypeFor[T]()) }

// ForType is [For] for a type known only at run time (the tool registry compiles the schema
// of each argument type once, by its reflect.Type).
func ForType(t reflect.Type) (json.RawMessage, error) {
	cs := derivedArgSchema(t)
	if cs.err != nil {
		return nil, cs.err
	}
	return slices.Clone(cs.raw), nil
}

// argSchemaCache memoises derived schemas by type. It is a pure cache: entries are
// deterministic functions of the type, so it has no observable side effect.
var argSchemaCache sync.Map // reflect.Type → *argSchema

type argSchema struct {
	raw json.RawMessage
	err error
}

func derivedArgSchema(t reflect.Type) *argSchema {
	if v, ok := argSchemaCache.Load(t); ok {
		return v.(*argSchema)
	}
	cs := &argSchema{}
	node, err := deriveArgSchema(t)
	if cs.err = err; err == nil {
		cs.raw, cs.err = Marshal(node.render())
	}
	v, _ := argSchemaCache.LoadOrStore(t, cs)
	return v.(*argSchema)
}

func deriveArgSchema(t reflect.Type) (*schemaNode, error) {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	b := &schemaBuilder{inProgress: map[reflect.Type]bool{}}
	node, err := b.build(base)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, t, err)
	}
	if !slices.Equal(node.types, []string{"object"}) || node.custom != nil {
		return nil, fmt.Errorf("%w: %s: tool arguments must be a JSON object (a struct or a map with string keys)", ErrUnsupported, t)
	}
	return node, nil
}

// Marshal encodes v as compact JSON without escaping <, > and & (which [json.Marshal]
// escapes for HTML): what a model reads arrives as written. It encodes every schema this
// package derives and every one read from elsewhere (a tool's parameters schema), and any
// other value a model reads as JSON text (a tool's structured content rendered as text, an
// MCP content item of a kind awaken does not map).
func Marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// bound is a numeric schema bound: the literal as rendered and its exact value.
type bound struct {
	lit json.Number
	val *big.Rat
}

func parseBound(s string) (*bound, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("%q is not a JSON number", s)
	}
	return &bound{lit: json.Number(s), val: r}, nil
}

func intBound(v int64) *bound {
	return &bound{lit: json.Number(strconv.FormatInt(v, 10)), val: new(big.Rat).SetInt64(v)}
}
func uintBound(v uint64) *bound {
	return &bound{lit: json.Number(strconv.FormatUint(v, 10)), val: new(big.Rat).SetUint64(v)}
}

// schemaNode is one derived schema, rendered to JSON: the schema the model sees, which is
// also the schema its arguments are checked against.
type schemaNode struct {
	types           []string // empty: any value
	description     string
	enum            []any // string, json.Number or bool
	def             any
	format          string
	contentEncoding string
	minimum         *bound
	maximum         *bound
	exclMinimum     *bound
	exclMaximum     *bound
	minLength       *int
	maxLength       *int
	pattern         *regexp.Regexp
	items           *schemaNode
	minItems        *int
	maxItems        *int
	uniqueItems     bool
	properties      map[string]*schemaNode // set for structs
	required        []string               // sorted
	closed          bool                   // additionalProperties: false
	additional      *schemaNode            // map values
	custom          map[string]any         // Provider: rendered as is
}

func (n *schemaNode) typeName() string {
	if len(n.types) == 0 {
		return "any"
	}
	return n.types[0]
}

func (n *schemaNode) render() map[string]any {
	if n.custom != nil {
		m := make(map[string]any, len(n.custom)+1)
		for k, v := range n.custom {
			m[k] = v
		}
		if n.description != "" {
			m["description"] = n.description
		}
		return m
	}
	m := map[string]any{}
	if len(n.types) == 1 {
		m["type"] = n.types[0]
	}
	if n.description != "" {
		m["description"] = n.description
	}
	if n.enum != nil {
		m["enum"] = n.enum
	}
	if n.def != nil {
		m["default"] = n.def
	}
	if n.format != "" {
		m["format"] = n.format
	}
	if n.contentEncoding != "" {
		m["contentEncoding"] = n.contentEncoding
	}
	for key, b := range map[string]*bound{"minimum": n.minimum, "maximum": n.maximum,
		"exclusiveMinimum": n.exclMinimum, "exclusiveMaximum": n.exclMaximum} {
		if b != nil {
			m[key] = b.lit
		}
	}
	for key, v := range map[string]*int{"minLength": n.minLength, "maxLength": n.maxLength,
		"minItems": n.minItems, "maxItems": n.maxItems} {
		if v != nil {
			m[key] = *v
		}
	}
	if n.pattern != nil {
		m["pattern"] = n.pattern.String()
	}
	if n.items != nil {
		m["items"] = n.items.render()
	}
	if n.uniqueItems {
		m["uniqueItems"] = true
	}
	if n.properties != nil {
		props := make(map[string]any, len(n.properties))
		for name, p := range n.properties {
			props[name] = p.render()
		}
		m["properties"] = props
		if len(n.required) > 0 {
			m["required"] = n.required
		}
	}
	if n.closed {
		m["additionalProperties"] = false
	} else if n.additional != nil {
		m["additionalProperties"] = n.additional.render()
	}
	return m
}

var (
	typeRawMessage      = reflect.TypeFor[json.RawMessage]()
	typeTime            = reflect.TypeFor[time.Time]()
	typeJSONUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	typeTextUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	typeSchemaProvider  = reflect.TypeFor[Provider]()
)

type schemaBuilder struct {
	inProgress map[reflect.Type]bool
	// doc is set when the builder derives a protocol document (see [OfType]) rather
	// than a tool's arguments.
	doc *Options
}

func (b *schemaBuilder) build(t reflect.Type) (*schemaNode, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if b.doc != nil && b.doc.Override != nil {
		if m, ok := b.doc.Override(t); ok {
			return &schemaNode{custom: m}, nil
		}
	}
	switch {
	case reflect.PointerTo(t).Implements(typeSchemaProvider):
		sp := reflect.New(t).Interface().(Provider)
		dec := json.NewDecoder(bytes.NewReader(sp.JSONSchema()))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil || m == nil {
			return nil, fmt.Errorf("%s.JSONSchema() is not a JSON object", t)
		}
		return &schemaNode{custom: m}, nil
	case t == typeRawMessage:
		return &schemaNode{}, nil
	case t == typeTime:
		return &schemaNode{types: []string{"string"}, format: "date-time"}, nil
	case reflect.PointerTo(t).Implements(typeJSONUnmarshaler) && (b.doc == nil || t.Kind() != reflect.Struct):
		// A document's struct with a custom UnmarshalJSON is read as its fields (the
		// decoders of the vocabulary only add defaults and strictness).
		return nil, fmt.Errorf("%s has a custom UnmarshalJSON; implement Provider to describe it", t)
	case reflect.PointerTo(t).Implements(typeTextUnmarshaler):
		return &schemaNode{types: []string{"string"}}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return &schemaNode{types: []string{"string"}}, nil
	case reflect.Bool:
		return &schemaNode{types: []string{"boolean"}}, nil
	case reflect.Int, reflect.Int64:
		return &schemaNode{types: []string{"integer"}}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		return &schemaNode{types: []string{"integer"},
			minimum: intBound(-1 << (bits - 1)), maximum: intBound(1<<(bits-1) - 1)}, nil
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return &schemaNode{types: []string{"integer"}, minimum: intBound(0)}, nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return &schemaNode{types: []string{"integer"},
			minimum: intBound(0), maximum: uintBound(uint64(1)<<t.Bits() - 1)}, nil
	case reflect.Float32, reflect.Float64:
		return &schemaNode{types: []string{"number"}}, nil
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return nil, fmt.Errorf("interface %s cannot be decoded from JSON", t)
		}
		return &schemaNode{}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 &&
			!reflect.PointerTo(t.Elem()).Implements(typeJSONUnmarshaler) &&
			!reflect.PointerTo(t.Elem()).Implements(typeTextUnmarshaler) {
			return &schemaNode{types: []string{"string"}, contentEncoding: "base64"}, nil
		}
		items, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		n := &schemaNode{types: []string{"array"}, items: items}
		if t.Kind() == reflect.Array {
			l := t.Len()
			n.minItems, n.maxItems = &l, &l
		}
		return n, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key type %s is not a string", t.Key())
		}
		values, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		return &schemaNode{types: []string{"object"}, additional: values}, nil
	case reflect.Struct:
		return b.buildStruct(t)
	default:
		return nil, fmt.Errorf("type %s (kind %s) has no JSON form", t, t.Kind())
	}
}

func (b *schemaBuilder) buildStruct(t reflect.Type) (*schemaNode, error) {
	if b.inProgress[t] {
		return nil, fmt.Errorf("recursive type %s cannot be inlined", t)
	}
	b.inProgress[t] = true
	defer delete(b.inProgress, t)

	tagKey := "json"
	if b.doc != nil && b.doc.TagKey != "" {
		tagKey = b.doc.TagKey
	}
	fields, err := jsonFieldsOfTag(t, tagKey)
	if err != nil {
		return nil, err
	}
	n := &schemaNode{types: []string{"object"}, properties: map[string]*schemaNode{}, closed: true}
	for _, f := range fields {
		prop, required, err := b.buildField(f)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t, f.goName, err)
		}
		n.properties[f.name] = prop
		if required {
			n.required = append(n.required, f.name)
		}
	}
	sort.Strings(n.required)
	return n, nil
}

func (b *schemaBuilder) buildField(f jsonField) (*schemaNode, bool, error) {
	var node *schemaNode
	if f.quoted {
		node = &schemaNode{types: []string{"string"}}
	} else {
		var err error
		if node, err = b.build(f.typ); err != nil {
			return nil, false, err
		}
	}
	tag, err := parseSchemaTag(f.tag)
	if err != nil {
		return nil, false, err
	}
	required := !f.optional
	if tag.required && tag.optional {
		return nil, false, errors.New("jsonschema tag says both required and optional")
	}
	if tag.required {
		required = true
	}
	if tag.optional {
		required = false
	}
	if err := tag.apply(node); err != nil {
		return nil, false, err
	}
	return node, required, nil
}
