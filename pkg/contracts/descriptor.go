package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
)

// This file is the tool descriptor: what a tool registers (id, kind, description,
// parameters schema, recovery policy) and how it is validated.

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
	// Annotations are the behaviour hints of an MCP tool, as its server listed them (nil:
	// the server gave none, or the tool is not an MCP tool). They describe; only the
	// host configuration decides whether they are trusted.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolInfo is implemented by a typed tool's argument type to name its tool, so the type is
// the one source of truth for id, description and schema. The methods must not depend on
// the receiver's value: they are called on the zero value.
type ToolInfo interface {
	ToolID() string
	ToolDescription() string
}

// DescriptorFor derives the descriptor of a typed tool whose arguments are T: the schema
// comes from T by reflection (see [typeschema.For]; a type it cannot describe is an error
// wrapping [typeschema.ErrUnsupported]), the kind is regular and the recovery
// policy the default; adjust them with [ToolDescriptor.WithKind] and
// [ToolDescriptor.WithRecoveryPolicy].
func DescriptorFor[T any](id, description string) (ToolDescriptor, error) {
	if err := ValidateToolID(id); err != nil {
		return ToolDescriptor{}, fmt.Errorf("%w: %w", ErrInvalidDescriptor, err)
	}
	schema, err := typeschema.For[T]()
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
	out, err := typeschema.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDescriptor, err)
	}
	return out, nil
}
