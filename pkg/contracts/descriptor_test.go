package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/sampleargs"
	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
)

// sampleToolArgs is the argument type of a realistic typed tool, shared with the schema
// derivation's and the argument decoder's tests (its schema inside a descriptor is pinned
// by testdata/golden/wire_tool_descriptor.json).
type sampleToolArgs = sampleargs.ToolArgs[Duration]

func TestDescriptorOfTypedTool(t *testing.T) {
	d, err := DescriptorOf[sampleToolArgs]()
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := typeschema.For[sampleToolArgs]()
	if d.ID != "search" || d.Description != "Search the corpus." || d.Kind != KindRegular ||
		d.RecoveryPolicy != DefaultRecoveryPolicy() || !bytes.Equal(d.Parameters, schema) {
		t.Fatalf("descriptor = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	d2 := d.WithKind(KindDelegation).WithRecoveryPolicy(DurableRequestPolicy())
	if d2.Kind != KindDelegation || d2.RecoveryPolicy != DurableRequestPolicy() || d.Kind != KindRegular {
		t.Fatalf("With* did not copy: %+v / %+v", d, d2)
	}
	if _, err := DescriptorFor[sampleToolArgs]("bad\x00id", "x"); !errors.Is(err, ErrInvalidDescriptor) || !errors.Is(err, ErrInvalidToolID) {
		t.Fatalf("bad id accepted: %v", err)
	}
	if _, err := DescriptorFor[sampleargs.Recursive]("r", "x"); !errors.Is(err, typeschema.ErrUnsupported) {
		t.Fatalf("recursive type accepted: %v", err)
	}
}

func TestToolDescriptorJSONAndValidate(t *testing.T) {
	var d ToolDescriptor
	if err := json.Unmarshal([]byte(`{"id":"echo","description":"Echo.","parameters":{"type":"object","properties":{}}}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Kind != KindRegular || d.RecoveryPolicy != DefaultRecoveryPolicy() {
		t.Fatalf("defaults not applied: %+v", d)
	}
	if err := json.Unmarshal([]byte(`{"id":"echo","parameters":{},"kind":"regular","extra":1}`), &d); err == nil {
		t.Fatal("unknown descriptor field accepted")
	}
	if err := json.Unmarshal([]byte(`{"id":"echo","parameters":{},"recovery_policy":{"max_attempts":0}}`), &d); !errors.Is(err, ErrZeroAttempts) {
		t.Fatalf("zero attempts in descriptor: %v", err)
	}
	good := ToolDescriptor{ID: "mcp__github__create_issue", Description: "x", Parameters: json.RawMessage(`{"type":"object"}`),
		Kind: KindRegular, RecoveryPolicy: DefaultRecoveryPolicy()}
	tests := []struct {
		name string
		mod  func(*ToolDescriptor)
		ok   bool
	}{
		{"good", func(*ToolDescriptor) {}, true},
		{"empty id", func(d *ToolDescriptor) { d.ID = "" }, false},
		{"array parameters", func(d *ToolDescriptor) { d.Parameters = json.RawMessage(`{"type":"array"}`) }, false},
		{"untyped parameters", func(d *ToolDescriptor) { d.Parameters = json.RawMessage(`{"properties":{}}`) }, false},
		{"invalid parameters", func(d *ToolDescriptor) { d.Parameters = json.RawMessage(`{`) }, false},
		{"unknown kind", func(d *ToolDescriptor) { d.Kind = "advisor" }, false},
		{"zero policy", func(d *ToolDescriptor) { d.RecoveryPolicy = ToolRecoveryPolicy{} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good
			tt.mod(&d)
			checkRefusal(t, "Validate()", d.Validate(), tt.ok, ErrInvalidDescriptor)
		})
	}
}

func TestNormalizeParameters(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"properties":{"a":{"type":"string"}},"type":"object"}`, true},
		{`{}`, `{"properties":{},"type":"object"}`, true},
		{``, `{"properties":{},"type":"object"}`, true},
		{`null`, `{"properties":{},"type":"object"}`, true},
		{`{"properties":{"n":{"type":"integer","maximum":1e3}}}`, `{"properties":{"n":{"maximum":1e3,"type":"integer"}},"type":"object"}`, true},
		{`{"type":"string"}`, ``, false},
		{`{"type":["object","null"]}`, ``, false},
		{`[]`, ``, false},
		{`{} {}`, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := NormalizeParameters(json.RawMessage(tt.in))
			if (err == nil) != tt.ok || (tt.ok && string(got) != tt.want) {
				t.Fatalf("got %s, %v; want %s ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestValidateToolID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"echo", true},
		{"mcp__github__create_issue", true},
		{"Bash", true},
		{"fs.read", true},
		{"ünïcode", true},
		{strings.Repeat("x", 200), true},
		{strings.Repeat("x", 201), false},
		{"", false},
		{"tab\there", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"zero\u200bwidth", false},
		{"bidi\u202eoverride", false},
		{"line\u2028sep", false},
		{"bad\xffutf8", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			checkRefusal(t, fmt.Sprintf("ValidateToolID(%q)", tt.id), ValidateToolID(tt.id), tt.ok, ErrInvalidToolID)
		})
	}
}
