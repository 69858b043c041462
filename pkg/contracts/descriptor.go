package contracts

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxToolIDLength bounds a tool id. Tool ids are not restricted to the identifier charset
// (MCP ids such as mcp__github__create_issue, or names with dots, are fine) but they are
// never empty, never longer than this, and never contain control or format characters.
const MaxToolIDLength = 200

var (
	// ErrInvalidToolID is wrapped by every failure of [ValidateToolID].
	ErrInvalidToolID = errors.New("invalid tool id")
	// ErrInvalidDescriptor is wrapped by every failure of [ToolDescriptor.Validate] and
	// [NormalizeParameters].
	ErrInvalidDescriptor = errors.New("invalid tool descriptor")
	// ErrUnsupportedSchema is wrapped when a Go type cannot be described by an inlined
	// JSON Schema (channels, functions, recursive types, non-string map keys, types with a
	// custom UnmarshalJSON that do not implement [SchemaProvider], malformed tags).
	ErrUnsupportedSchema = errors.New("cannot derive a JSON schema")
)

// ValidateToolID checks a tool id: 1 to [MaxToolIDLength] bytes of valid UTF-8 without
// control characters, format characters (zero-width and bidi controls, which would let two
// ids look alike in an approval prompt) or line separators.
func ValidateToolID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidToolID)
	}
	if len(id) > MaxToolIDLength {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidToolID, MaxToolIDLength)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidToolID)
	}
	if i := strings.IndexFunc(id, isForbiddenIDRune); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("%w: %q contains %U", ErrInvalidToolID, id, r)
	}
	return nil
}

// isForbiddenIDRune reports control (Cc), format (Cf) and line/paragraph separator runes.
func isForbiddenIDRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) || r == utf8.RuneError
}

// Valid reports whether k is one of the tool kinds.
func (k ToolKind) Valid() bool {
	switch k {
	case KindRegular, KindClientExecuted, KindDelegation:
		return true
	}
	return false
}

// ToolDescriptor is the model-visible description of one tool in an agent snapshot: its
// id, what it does, the JSON Schema of its arguments, how it is dispatched and the
// recovery policy pinned into each of its calls. It is identity and schema only, never an
// executable handle or a permission grant. For a typed Go tool derive it with
// [DescriptorFor] or [DescriptorOf]; never write a second one by hand.
type ToolDescriptor struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	// Parameters is a JSON Schema (draft-07) of an object: inlined (no $ref), no title,
	// "additionalProperties": false on every struct.
	Parameters     json.RawMessage    `json:"parameters"`
	Kind           ToolKind           `json:"kind"`
	RecoveryPolicy ToolRecoveryPolicy `json:"recovery_policy"`
}

// ToolInfo is implemented by a typed tool's argument type to name its tool, so the type is
// the one source of truth for id, description and schema. The methods must not depend on
// the receiver's value: they are called on the zero value.
type ToolInfo interface {
	ToolID() string
	ToolDescription() string
}

// SchemaProvider lets a type describe itself when reflection cannot (for example a type
// with a custom UnmarshalJSON). JSONSchema must return a JSON object; it is inlined as is,
// and values of the type are checked only by decoding.
type SchemaProvider interface {
	JSONSchema() json.RawMessage
}

// DescriptorFor derives the descriptor of a typed tool whose arguments are T: the schema
// comes from T by reflection (see [SchemaFor]), the kind is regular and the recovery
// policy the default; adjust them with [ToolDescriptor.WithKind] and
// [ToolDescriptor.WithRecoveryPolicy].
func DescriptorFor[T any](id, description string) (ToolDescriptor, error) {
	if err := ValidateToolID(id); err != nil {
		return ToolDescriptor{}, fmt.Errorf("%w: %w", ErrInvalidDescriptor, err)
	}
	schema, err := SchemaFor[T]()
	if err != nil {
		return ToolDescriptor{}, fmt.Errorf("%w: tool %s: %w", ErrInvalidDescriptor, id, err)
	}
	return ToolDescriptor{
		ID:             id,
		Description:    description,
		Parameters:     schema,
		Kind:           KindRegular,
		RecoveryPolicy: DefaultRecoveryPolicy(),
	}, nil
}

// DescriptorOf is [DescriptorFor] with the id and description taken from T's [ToolInfo].
func DescriptorOf[T ToolInfo]() (ToolDescriptor, error) {
	var zero T
	return DescriptorFor[T](zero.ToolID(), zero.ToolDescription())
}

// WithKind returns a copy of d with kind k.
func (d ToolDescriptor) WithKind(k ToolKind) ToolDescriptor {
	d.Kind = k
	return d
}

// WithRecoveryPolicy returns a copy of d with recovery policy p.
func (d ToolDescriptor) WithRecoveryPolicy(p ToolRecoveryPolicy) ToolDescriptor {
	d.RecoveryPolicy = p
	return d
}

// Validate checks d: a valid tool id, parameters that are a JSON Schema of an object, a
// known kind and a well-formed recovery policy. Failures wrap [ErrInvalidDescriptor].
func (d ToolDescriptor) Validate() error {
	if err := ValidateToolID(d.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidDescriptor, err)
	}
	if _, err := NormalizeParameters(d.Parameters); err != nil {
		return fmt.Errorf("tool %s: %w", d.ID, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(d.Parameters, &obj); err != nil || string(obj["type"]) != `"object"` {
		return fmt.Errorf("%w: tool %s: parameters must declare \"type\": \"object\"", ErrInvalidDescriptor, d.ID)
	}
	if !d.Kind.Valid() {
		return fmt.Errorf("%w: tool %s: unknown kind %q", ErrInvalidDescriptor, d.ID, d.Kind)
	}
	if err := d.RecoveryPolicy.check(); err != nil {
		return fmt.Errorf("%w: tool %s: %w", ErrInvalidDescriptor, d.ID, err)
	}
	return nil
}

// UnmarshalJSON reads a descriptor strictly (unknown fields are an error), defaulting a
// missing kind to regular and a missing recovery policy to [DefaultRecoveryPolicy].
func (d *ToolDescriptor) UnmarshalJSON(data []byte) error {
	type plain ToolDescriptor
	p := plain{Kind: KindRegular, RecoveryPolicy: DefaultRecoveryPolicy()}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("tool descriptor: %w", err)
	}
	*d = ToolDescriptor(p)
	return nil
}

// NormalizeParameters turns a foreign parameters schema (for example an MCP tool's input
// schema) into the normalised object form: it must be a JSON object whose "type", if
// present, is "object"; a missing "type" becomes "object" and missing "properties" an
// empty object. The result is canonical JSON (sorted keys, compact).
func NormalizeParameters(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: parameters are not a JSON object", ErrInvalidDescriptor)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: parameters have trailing data", ErrInvalidDescriptor)
	}
	switch t := obj["type"].(type) {
	case nil:
		obj["type"] = "object"
	case string:
		if t != "object" {
			return nil, fmt.Errorf("%w: parameters schema has type %q, want \"object\"", ErrInvalidDescriptor, t)
		}
	default:
		return nil, fmt.Errorf("%w: parameters schema type must be the string \"object\"", ErrInvalidDescriptor)
	}
	if _, ok := obj["properties"]; !ok {
		obj["properties"] = map[string]any{}
	}
	out, err := marshalNoHTMLEscape(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDescriptor, err)
	}
	return out, nil
}

// SchemaFor returns the JSON Schema of T's JSON form, derived by reflection and cached per
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
// with string keys, nested structs (inlined), time.Time (date-time string), [Duration]
// (string), json.RawMessage and interface{} (any value), encoding.TextUnmarshaler
// (string) and [SchemaProvider]. Patterns use Go (RE2) syntax.
func SchemaFor[T any]() (json.RawMessage, error) {
	cs := compiledArgSchema(reflect.TypeFor[T]())
	if cs.err != nil {
		return nil, cs.err
	}
	return slices.Clone(cs.raw), nil
}

// DecodeArguments decodes a call's raw arguments into T. JSON null or empty arguments
// mean {}. The value must then satisfy T's derived schema (see [SchemaFor]): no unknown
// field (names match exactly, not case-insensitively), every required field present and
// not null, every value of the right type and within its declared constraints; and it must
// decode strictly into T. Any such failure is a [*ToolError] of kind
// [ToolErrorInvalidArguments] naming the field, which the model sees as "invalid tool
// arguments: …". A T whose schema cannot be derived is the tool author's fault, not the
// model's, and yields kind [ToolErrorExecution]. Optional fields may be null.
func DecodeArguments[T any](raw json.RawMessage) (T, error) {
	var zero T
	cs := compiledArgSchema(reflect.TypeFor[T]())
	if cs.err != nil {
		return zero, ExecutionFailed("tool argument schema: " + cs.err.Error())
	}
	data := bytes.TrimSpace(raw)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return zero, InvalidArguments("arguments are not valid JSON: " + err.Error())
	}
	if _, err := dec.Token(); err == nil {
		return zero, InvalidArguments("arguments have trailing data after the JSON value")
	}
	if err := cs.node.check(v, ""); err != nil {
		return zero, InvalidArguments(err.Error())
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	var out T
	if err := strict.Decode(&out); err != nil {
		return zero, InvalidArguments(describeDecodeError(err))
	}
	return out, nil
}

// describeDecodeError names the field of an encoding/json failure.
func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	}
	return err.Error()
}

// argSchemaCache memoises derived schemas by type. It is a pure cache: entries are
// deterministic functions of the type, so it has no observable side effect.
var argSchemaCache sync.Map // reflect.Type → *argSchema

type argSchema struct {
	node *schemaNode
	raw  json.RawMessage
	err  error
}

func compiledArgSchema(t reflect.Type) *argSchema {
	if v, ok := argSchemaCache.Load(t); ok {
		return v.(*argSchema)
	}
	cs := &argSchema{}
	cs.node, cs.err = deriveArgSchema(t)
	if cs.err == nil {
		cs.raw, cs.err = marshalNoHTMLEscape(cs.node.render())
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
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupportedSchema, t, err)
	}
	if !slices.Equal(node.types, []string{"object"}) || node.custom != nil {
		return nil, fmt.Errorf("%w: %s: tool arguments must be a JSON object (a struct or a map with string keys)", ErrUnsupportedSchema, t)
	}
	return node, nil
}

func marshalNoHTMLEscape(v any) ([]byte, error) {
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

// schemaNode is one derived schema: rendered to JSON for the model and used to check
// argument values, so the schema the model sees is exactly the schema that is enforced.
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
	custom          map[string]any         // SchemaProvider: rendered as is, not checked
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

// check validates a value decoded with UseNumber against n. path names the value for
// error messages ("" is the arguments object itself).
func (n *schemaNode) check(v any, path string) error {
	if n.custom != nil || len(n.types) == 0 {
		return nil
	}
	where := func() string {
		if path == "" {
			return "arguments"
		}
		return fmt.Sprintf("field %q", path)
	}
	mismatch := func(got string) error {
		return fmt.Errorf("%s: want %s, got %s", where(), n.typeName(), got)
	}
	switch x := v.(type) {
	case nil:
		return mismatch("null")
	case bool:
		if !slices.Contains(n.types, "boolean") {
			return mismatch("boolean")
		}
		if n.enum != nil && !slices.Contains(n.enum, any(x)) {
			return fmt.Errorf("%s: %v is not one of %s", where(), x, renderEnum(n.enum))
		}
	case string:
		if !slices.Contains(n.types, "string") {
			return mismatch("string")
		}
		runes := utf8.RuneCountInString(x)
		if n.minLength != nil && runes < *n.minLength {
			return fmt.Errorf("%s: shorter than %d characters", where(), *n.minLength)
		}
		if n.maxLength != nil && runes > *n.maxLength {
			return fmt.Errorf("%s: longer than %d characters", where(), *n.maxLength)
		}
		if n.pattern != nil && !n.pattern.MatchString(x) {
			return fmt.Errorf("%s: does not match pattern %s", where(), n.pattern)
		}
		if n.enum != nil && !slices.Contains(n.enum, any(x)) {
			return fmt.Errorf("%s: %q is not one of %s", where(), x, renderEnum(n.enum))
		}
	case json.Number:
		return n.checkNumber(x, where, mismatch)
	case []any:
		if !slices.Contains(n.types, "array") {
			return mismatch("array")
		}
		if n.minItems != nil && len(x) < *n.minItems {
			return fmt.Errorf("%s: fewer than %d items", where(), *n.minItems)
		}
		if n.maxItems != nil && len(x) > *n.maxItems {
			return fmt.Errorf("%s: more than %d items", where(), *n.maxItems)
		}
		if n.uniqueItems {
			seen := make(map[string]bool, len(x))
			for i, item := range x {
				key, _ := json.Marshal(item)
				if seen[string(key)] {
					return fmt.Errorf("%s: item %d is a duplicate", where(), i)
				}
				seen[string(key)] = true
			}
		}
		if n.items != nil {
			for i, item := range x {
				if err := n.items.check(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		if !slices.Contains(n.types, "object") {
			return mismatch("object")
		}
		return n.checkObject(x, path)
	default:
		return mismatch(fmt.Sprintf("%T", v))
	}
	return nil
}

func (n *schemaNode) checkNumber(x json.Number, where func() string, mismatch func(string) error) error {
	isInt := !strings.ContainsAny(string(x), ".eE")
	switch {
	case slices.Contains(n.types, "number"):
	case slices.Contains(n.types, "integer"):
		if !isInt {
			return fmt.Errorf("%s: want integer, got %s", where(), x)
		}
	default:
		return mismatch("number")
	}
	val, ok := new(big.Rat).SetString(string(x))
	if !ok {
		return fmt.Errorf("%s: %s is not a number", where(), x)
	}
	if n.minimum != nil && val.Cmp(n.minimum.val) < 0 {
		return fmt.Errorf("%s: %s is less than the minimum %s", where(), x, n.minimum.lit)
	}
	if n.maximum != nil && val.Cmp(n.maximum.val) > 0 {
		return fmt.Errorf("%s: %s is greater than the maximum %s", where(), x, n.maximum.lit)
	}
	if n.exclMinimum != nil && val.Cmp(n.exclMinimum.val) <= 0 {
		return fmt.Errorf("%s: %s is not greater than %s", where(), x, n.exclMinimum.lit)
	}
	if n.exclMaximum != nil && val.Cmp(n.exclMaximum.val) >= 0 {
		return fmt.Errorf("%s: %s is not less than %s", where(), x, n.exclMaximum.lit)
	}
	if n.enum != nil {
		for _, e := range n.enum {
			if en, ok := e.(json.Number); ok {
				if ev, ok := new(big.Rat).SetString(string(en)); ok && ev.Cmp(val) == 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("%s: %s is not one of %s", where(), x, renderEnum(n.enum))
	}
	return nil
}

func (n *schemaNode) checkObject(x map[string]any, path string) error {
	child := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	if n.properties != nil {
		for _, name := range n.required {
			v, present := x[name]
			if !present {
				return fmt.Errorf("missing required field %q", child(name))
			}
			if v == nil && len(n.properties[name].types) != 0 {
				return fmt.Errorf("required field %q cannot be null", child(name))
			}
		}
	}
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := x[k]
		if prop, ok := n.properties[k]; ok {
			if v == nil && !slices.Contains(n.required, k) {
				continue // an optional field may be null: it means absent
			}
			if err := prop.check(v, child(k)); err != nil {
				return err
			}
			continue
		}
		if n.closed {
			return fmt.Errorf("unknown field %q", child(k))
		}
		if n.additional != nil {
			if err := n.additional.check(v, child(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func renderEnum(enum []any) string {
	b, _ := json.Marshal(enum)
	return string(b)
}

var (
	typeRawMessage      = reflect.TypeFor[json.RawMessage]()
	typeTime            = reflect.TypeFor[time.Time]()
	typeDuration        = reflect.TypeFor[Duration]()
	typeJSONUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	typeTextUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	typeSchemaProvider  = reflect.TypeFor[SchemaProvider]()
)

type schemaBuilder struct {
	inProgress map[reflect.Type]bool
	// doc is set when the builder derives a protocol document (see [SchemaOfType]) rather
	// than a tool's arguments.
	doc *SchemaOptions
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
		sp := reflect.New(t).Interface().(SchemaProvider)
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
	case t == typeDuration:
		return &schemaNode{types: []string{"string"}}, nil
	case reflect.PointerTo(t).Implements(typeJSONUnmarshaler) && (b.doc == nil || t.Kind() != reflect.Struct):
		// A document's struct with a custom UnmarshalJSON is read as its fields (the
		// decoders of the vocabulary only add defaults and strictness).
		return nil, fmt.Errorf("%s has a custom UnmarshalJSON; implement SchemaProvider to describe it", t)
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

// schemaTag is the parsed `jsonschema` and `desc` tags of one field.
type schemaTag struct {
	description, format, pattern, def  string
	hasDefault                         bool
	enum                               []string
	minimum, maximum, exclMin, exclMax string
	minLength, maxLength               *int
	minItems, maxItems                 *int
	uniqueItems, required, optional    bool
}

func parseSchemaTag(tag reflect.StructTag) (schemaTag, error) {
	var st schemaTag
	desc, hasDesc := tag.Lookup("desc")
	st.description = desc
	raw := tag.Get("jsonschema")
	if raw == "" {
		return st, nil
	}
	for _, part := range splitUnescaped(raw) {
		key, value, hasValue := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		intValue := func() (*int, error) {
			v, err := strconv.Atoi(value)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("jsonschema %s=%q is not a non-negative integer", key, value)
			}
			return &v, nil
		}
		var err error
		switch key {
		case "description":
			if hasDesc {
				return st, errors.New("both a desc tag and a jsonschema description")
			}
			st.description = value
		case "enum":
			st.enum = strings.Split(value, "|")
		case "default":
			st.def, st.hasDefault = value, true
		case "format":
			st.format = value
		case "pattern":
			st.pattern = value
		case "minimum":
			st.minimum = value
		case "maximum":
			st.maximum = value
		case "exclusiveMinimum":
			st.exclMin = value
		case "exclusiveMaximum":
			st.exclMax = value
		case "minLength":
			st.minLength, err = intValue()
		case "maxLength":
			st.maxLength, err = intValue()
		case "minItems":
			st.minItems, err = intValue()
		case "maxItems":
			st.maxItems, err = intValue()
		case "uniqueItems":
			st.uniqueItems = true
		case "required":
			st.required = true
		case "optional":
			st.optional = true
		default:
			return st, fmt.Errorf("unknown jsonschema keyword %q", key)
		}
		if err != nil {
			return st, err
		}
		flag := key == "uniqueItems" || key == "required" || key == "optional"
		if flag == hasValue {
			if flag {
				return st, fmt.Errorf("jsonschema keyword %q takes no value", key)
			}
			return st, fmt.Errorf("jsonschema keyword %q needs a value", key)
		}
	}
	return st, nil
}

// splitUnescaped splits s on commas not preceded by a backslash and unescapes "\,".
func splitUnescaped(s string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == ',':
			cur.WriteByte(',')
			i++
		case s[i] == ',':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(parts, cur.String())
}

// apply sets the keywords of st on node. Value keywords of a slice of scalars go to its
// items; array keywords stay on the array.
func (st schemaTag) apply(node *schemaNode) error {
	node.description = st.description
	if st.uniqueItems || st.minItems != nil || st.maxItems != nil {
		if node.typeName() != "array" {
			return errors.New("minItems, maxItems and uniqueItems need a slice or array field")
		}
		node.uniqueItems = node.uniqueItems || st.uniqueItems
		if st.minItems != nil {
			node.minItems = st.minItems
		}
		if st.maxItems != nil {
			node.maxItems = st.maxItems
		}
	}
	target := node
	if node.typeName() == "array" && node.items != nil && node.items.properties == nil && node.items.items == nil {
		target = node.items
	}
	kind := target.typeName()
	if target.custom != nil {
		kind = "custom"
	}
	if st.enum != nil || st.hasDefault {
		if kind != "string" && kind != "integer" && kind != "number" && kind != "boolean" {
			return fmt.Errorf("enum and default need a scalar field, not %s", kind)
		}
		for _, e := range st.enum {
			v, err := scalarValue(kind, e)
			if err != nil {
				return fmt.Errorf("enum: %w", err)
			}
			target.enum = append(target.enum, v)
		}
		if st.hasDefault {
			if target != node {
				return errors.New("default needs a scalar field, not a slice")
			}
			v, err := scalarValue(kind, st.def)
			if err != nil {
				return fmt.Errorf("default: %w", err)
			}
			node.def = v
		}
	}
	if st.format != "" || st.pattern != "" || st.minLength != nil || st.maxLength != nil {
		if kind != "string" {
			return fmt.Errorf("format, pattern, minLength and maxLength need a string field, not %s", kind)
		}
		if st.format != "" {
			target.format = st.format
		}
		if st.pattern != "" {
			re, err := regexp.Compile(st.pattern)
			if err != nil {
				return fmt.Errorf("pattern: %w", err)
			}
			target.pattern = re
		}
		if st.minLength != nil {
			target.minLength = st.minLength
		}
		if st.maxLength != nil {
			target.maxLength = st.maxLength
		}
	}
	numeric := []struct {
		name string
		lit  string
		dst  **bound
		up   bool // an upper bound: keep the smaller of tag and type bound
	}{
		{"minimum", st.minimum, &target.minimum, false},
		{"maximum", st.maximum, &target.maximum, true},
		{"exclusiveMinimum", st.exclMin, &target.exclMinimum, false},
		{"exclusiveMaximum", st.exclMax, &target.exclMaximum, true},
	}
	for _, nb := range numeric {
		if nb.lit == "" {
			continue
		}
		if kind != "integer" && kind != "number" {
			return fmt.Errorf("%s needs a numeric field, not %s", nb.name, kind)
		}
		bd, err := parseBound(nb.lit)
		if err != nil {
			return fmt.Errorf("%s: %w", nb.name, err)
		}
		if cur := *nb.dst; cur == nil || (nb.up && bd.val.Cmp(cur.val) < 0) || (!nb.up && bd.val.Cmp(cur.val) > 0) {
			*nb.dst = bd
		}
	}
	return nil
}

// scalarValue parses a tag literal as a JSON value of kind.
func scalarValue(kind, s string) (any, error) {
	switch kind {
	case "string":
		return s, nil
	case "boolean":
		v, err := strconv.ParseBool(s)
		if err != nil || (s != "true" && s != "false") {
			return nil, fmt.Errorf("%q is not true or false", s)
		}
		return v, nil
	case "integer":
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			if _, uerr := strconv.ParseUint(s, 10, 64); uerr != nil {
				return nil, fmt.Errorf("%q is not an integer", s)
			}
		}
		return json.Number(s), nil
	default: // number
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("%q is not a JSON number", s)
		}
		return json.Number(s), nil
	}
}

// jsonField is one field of a struct's JSON form, resolved as encoding/json does.
type jsonField struct {
	name     string
	goName   string
	index    []int
	typ      reflect.Type
	tagged   bool
	optional bool
	quoted   bool
	tag      reflect.StructTag
}

// jsonFieldsOf lists the JSON fields of struct type t with encoding/json's visibility
// rules: exported fields, json tag names, "-" skipped, untagged embedded structs
// flattened, and among fields of one name the shallowest wins (a tagged one breaking a
// tie, otherwise all of them vanish).
func jsonFieldsOf(t reflect.Type) ([]jsonField, error) { return jsonFieldsOfTag(t, "json") }

// jsonFieldsOfTag is [jsonFieldsOf] reading the names and options from tag key (a YAML
// document's fields are named by their yaml tags).
func jsonFieldsOfTag(t reflect.Type, key string) ([]jsonField, error) {
	type level struct {
		typ        reflect.Type
		index      []int
		viaPointer bool
	}
	var all []jsonField
	next := []level{{typ: t}}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current := next
		next = nil
		for _, lv := range current {
			if visited[lv.typ] {
				continue
			}
			visited[lv.typ] = true
			for i := 0; i < lv.typ.NumField(); i++ {
				sf := lv.typ.Field(i)
				ft := sf.Type
				if sf.Anonymous {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get(key)
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				index := append(slices.Clone(lv.index), i)
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, level{typ: ft, index: index, viaPointer: lv.viaPointer || sf.Type.Kind() == reflect.Pointer})
					continue
				}
				f := jsonField{
					name:   name,
					goName: sf.Name,
					index:  index,
					typ:    sf.Type,
					tagged: name != "",
					tag:    sf.Tag,
				}
				if f.name == "" {
					f.name = sf.Name
				}
				for _, opt := range strings.Split(opts, ",") {
					switch opt {
					case "omitempty", "omitzero":
						f.optional = true
					case "string":
						switch ft.Kind() {
						case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
							reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
							reflect.Float32, reflect.Float64, reflect.String:
							f.quoted = sf.Type.Kind() != reflect.Pointer
						}
					}
				}
				if sf.Type.Kind() == reflect.Pointer || lv.viaPointer {
					f.optional = true
				}
				all = append(all, f)
			}
		}
	}
	byName := map[string][]jsonField{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []jsonField
	for _, name := range order {
		cands := byName[name]
		minDepth := len(cands[0].index)
		for _, c := range cands {
			minDepth = min(minDepth, len(c.index))
		}
		var shallow, tagged []jsonField
		for _, c := range cands {
			if len(c.index) == minDepth {
				shallow = append(shallow, c)
				if c.tagged {
					tagged = append(tagged, c)
				}
			}
		}
		switch {
		case len(shallow) == 1:
			out = append(out, shallow[0])
		case len(tagged) == 1:
			out = append(out, tagged[0])
		}
	}
	return out, nil
}
