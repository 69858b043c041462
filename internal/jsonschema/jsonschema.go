// Package jsonschema compiles JSON Schemas and validates JSON documents against them.
//
// It is the project's one door to its JSON Schema validator
// (github.com/santhosh-tekuri/jsonschema/v6, which passes the official JSON-Schema-Test-Suite
// for draft 2020-12): tool arguments, wire payloads and the checked-in protocol schemas are
// all validated through it, so every caller reports a failure the same way — a
// *ValidationError naming the offending field as a JSON pointer.
package jsonschema

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ErrInvalidSchema wraps every failure to compile a schema.
var ErrInvalidSchema = errors.New("jsonschema: invalid schema")

// ErrInvalidJSON wraps a document that is not JSON at all (nothing to validate).
var ErrInvalidJSON = errors.New("jsonschema: document is not valid JSON")

// Schema is a compiled schema, safe for concurrent use.
type Schema struct {
	compiled *jsonschema.Schema
}

// ValidationError is a document that is JSON but does not satisfy the schema. Field and
// Message describe the first failing leaf in document order, which is what a caller
// shows a model or a user; Details lists every failing leaf.
type ValidationError struct {
	// Field is the JSON pointer of the offending value ("" for the document itself).
	Field string
	// Message says what is wrong with it, e.g. "got number, want string".
	Message string
	// Details holds every failing leaf as "pointer: message", sorted.
	Details []string
}

func (e *ValidationError) Error() string {
	where := e.Field
	if where == "" {
		where = "(root)"
	}
	return fmt.Sprintf("invalid at %s: %s", where, e.Message)
}

// DefaultDraft is the dialect assumed for a schema that names no $schema.
var DefaultDraft = jsonschema.Draft2020

// Compile compiles one self-contained schema document. A schema whose $ref points at
// other documents needs CompileSet.
func Compile(schema []byte) (*Schema, error) {
	return CompileSet("schema.json", map[string][]byte{"schema.json": schema})
}

// CompileSet compiles the document named root from a set of documents that may
// reference each other by name (relative $ref such as "other.json#/$defs/x"). Nothing is
// loaded from the network or the file system: an unknown reference is an error.
func CompileSet(root string, documents map[string][]byte) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(DefaultDraft)
	c.UseLoader(refusingLoader{})
	names := make([]string, 0, len(documents))
	for name := range documents {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(documents[name]))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSchema, name, err)
		}
		if err := c.AddResource(resourceURL(name), doc); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSchema, name, err)
		}
	}
	compiled, err := c.Compile(resourceURL(root))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSchema, root, err)
	}
	return &Schema{compiled: compiled}, nil
}

// Validate checks one JSON document. It returns nil, an error wrapping ErrInvalidJSON,
// or a *ValidationError.
func (s *Schema) Validate(document []byte) error {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(document))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return s.ValidateValue(value)
}

// ValidateValue checks a value decoded from JSON. Numbers must be json.Number or
// float64 (as encoding/json decodes them); Validate keeps large integers exact.
func (s *Schema) ValidateValue(value any) error {
	err := s.compiled.Validate(value)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("jsonschema: validate: %w", err)
	}
	return flatten(verr)
}

var printer = message.NewPrinter(language.English)

// flatten turns the validator's tree of causes into the leaves a person reads.
func flatten(root *jsonschema.ValidationError) *ValidationError {
	type leaf struct{ pointer, message string }
	var leaves []leaf
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, leaf{pointer(e.InstanceLocation), e.ErrorKind.LocalizedString(printer)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(root)
	sort.SliceStable(leaves, func(i, j int) bool { return leaves[i].pointer < leaves[j].pointer })
	out := &ValidationError{Field: leaves[0].pointer, Message: leaves[0].message}
	for _, l := range leaves {
		out.Details = append(out.Details, l.pointer+": "+l.message)
	}
	return out
}

// pointer renders an instance location as an RFC 6901 JSON pointer.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// resourceURL names an in-memory document; the scheme keeps relative references inside
// the set.
func resourceURL(name string) string { return "mem:///" + strings.TrimPrefix(name, "/") }

// refusingLoader refuses every reference that is not one of the compiled documents, so
// compiling a schema never reads a file or the network.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("reference %q is not among the compiled documents", url)
}
