package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/awaken-dev/awaken/internal/jsonschema"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// A tool entry: its normalization at load, its argument check and what it implies.

func (t *Tool) normalize(f string) error {
	if t.ID == "" || len(t.ID) > contracts.MaxIDLength || strings.ContainsAny(t.ID, " \t\r\n*>") {
		return &FieldError{f + ".id", fmt.Sprintf("%q must be 1..200 characters without spaces, '*' or '>'", t.ID)}
	}
	if strings.HasPrefix(t.ID, "mcp__") {
		return &FieldError{f + ".id", "mcp__ ids are reserved for tools of MCP servers (executors.mcp)"}
	}
	if t.Cost != nil && (!(*t.Cost >= 0) || math.IsInf(*t.Cost, 0)) {
		return &FieldError{f + ".cost", fmt.Sprintf("%v must be a finite number >= 0", *t.Cost)}
	}
	if t.Kind == "" {
		t.Kind = contracts.KindRegular
	}
	switch t.Kind {
	case contracts.KindRegular, contracts.KindClientExecuted, contracts.KindDelegation:
	default:
		return &FieldError{f + ".kind", fmt.Sprintf("%q must be regular, client_executed or delegation", t.Kind)}
	}
	if t.Target == "" {
		t.Target = contracts.TargetBrain
	}
	switch t.Target {
	case contracts.TargetBrain, contracts.TargetSandbox:
	default:
		return &FieldError{f + ".target", fmt.Sprintf("%q must be brain or sandbox", t.Target)}
	}
	if t.Capability == "" {
		t.Capability = contracts.CapabilityNonRecoverable
		if t.Kind == contracts.KindDelegation {
			t.Capability = contracts.CapabilityDurableRequest
		}
	}
	if !t.Capability.Valid() {
		return &FieldError{f + ".capability", fmt.Sprintf("%q must be non_recoverable, replay_safe, idempotent or durable_request", t.Capability)}
	}
	if t.Recovery != nil {
		if t.Recovery.MaxAttempts == 0 {
			t.Recovery.MaxAttempts = 3
		}
		if t.Recovery.MaxAttempts < 1 || t.Recovery.MaxAttempts > 65535 {
			return &FieldError{f + ".recovery_policy.max_attempts", "must be within 1..65535"}
		}
		if t.Recovery.Mode == "" {
			t.Recovery.Mode = contracts.ModeNeverReplay
		}
	}
	if err := t.RecoveryPolicy().Validate(t.EffectiveCapability()); err != nil {
		return &FieldError{f + ".recovery_policy.mode", err.Error()}
	}
	if t.ParallelCompletion && t.Kind != contracts.KindDelegation {
		return &FieldError{f + ".parallel_completion", "only delegation tools can declare parallel completion"}
	}
	if t.Parallel && t.Kind == contracts.KindClientExecuted {
		return &FieldError{f + ".parallel", "a client-executed tool runs on the client, which awaken does not run concurrently"}
	}
	if t.Timeout < 0 {
		return &FieldError{f + ".timeout", "must not be negative"}
	}
	if t.Target == contracts.TargetSandbox {
		if t.Module == "" && t.SetResult == nil && t.Kind != contracts.KindClientExecuted {
			return &FieldError{f + ".module", "a sandbox tool needs a WebAssembly module"}
		}
		if t.MemoryLimitMiB < 0 || t.MemoryLimitMiB > 4096 {
			return &FieldError{f + ".memory_limit_mib", "must be within 0..4096"}
		}
		if t.MaxOutputBytes < 0 {
			return &FieldError{f + ".max_output_bytes", "must not be negative"}
		}
		if t.ReconcileModule != "" && t.Module == "" {
			return &FieldError{f + ".reconcile_module", "a reconcile module needs the tool's own module"}
		}
	} else if t.Module != "" || t.ReconcileModule != "" || t.Scratch || t.MemoryLimitMiB != 0 {
		return &FieldError{f + ".module", "module, reconcile_module, scratch and memory_limit_mib apply only to sandbox tools"}
	}
	if t.Builtin == "" && t.Target == contracts.TargetBrain {
		t.Builtin = t.ID
	}
	if t.Parameters != nil {
		b, err := json.Marshal(t.Parameters)
		if err != nil {
			return &FieldError{f + ".parameters", "must be a JSON Schema object: " + err.Error()}
		}
		var obj map[string]any
		if json.Unmarshal(b, &obj) != nil {
			return &FieldError{f + ".parameters", "must be a JSON Schema object"}
		}
		if t.schema, err = jsonschema.Compile(b); err != nil {
			return &FieldError{f + ".parameters", err.Error()}
		}
	}
	return nil
}

// ValidateArguments checks a call's arguments (JSON; empty or null mean {}) against the
// configured parameters schema, before anything runs. A tool without parameters accepts
// any JSON. A failure is the model-visible "invalid tool arguments: …" naming the field.
func (t *Tool) ValidateArguments(args json.RawMessage) error {
	if t.schema == nil {
		return nil
	}
	return ValidateAgainst(t.schema, args)
}

// ValidateAgainst checks arguments against a compiled parameters schema the way
// [Tool.ValidateArguments] does; executors use it for schemas that come from elsewhere
// (an MCP server's inputSchema).
func ValidateAgainst(schema *jsonschema.Schema, args json.RawMessage) error {
	doc := bytes.TrimSpace(args)
	if len(doc) == 0 || bytes.Equal(doc, []byte("null")) {
		doc = []byte("{}")
	}
	err := schema.Validate(doc)
	var ve *jsonschema.ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve):
		field := ve.Field
		if field == "" {
			field = "(arguments)"
		}
		return contracts.InvalidArguments(field + ": " + ve.Message)
	}
	return contracts.InvalidArguments("arguments are not valid JSON")
}

// EffectiveCapability is the capability the pinned policy is validated against: configuration
// can only match or reduce a tool's capability, and delegation tools are durable requests whatever they declare.
func (t *Tool) EffectiveCapability() contracts.ToolRecoveryCapability {
	if t.Kind == contracts.KindDelegation {
		return contracts.CapabilityDurableRequest
	}
	return t.Capability
}

// RecoveryPolicy is the policy pinned into every call of this tool: the configured one,
// durable_request for delegation tools without one, else never_replay with 3 attempts.
func (t *Tool) RecoveryPolicy() contracts.ToolRecoveryPolicy {
	if t.Recovery != nil {
		return contracts.ToolRecoveryPolicy{Mode: t.Recovery.Mode, MaxAttempts: uint16(t.Recovery.MaxAttempts)}
	}
	if t.Kind == contracts.KindDelegation {
		return contracts.ToolRecoveryPolicy{Mode: contracts.ModeDurableRequest, MaxAttempts: 3}
	}
	return contracts.DefaultRecoveryPolicy()
}

// ParametersJSON returns the configured JSON Schema, or nil.
func (t *Tool) ParametersJSON() json.RawMessage {
	if t.Parameters == nil {
		return nil
	}
	b, _ := json.Marshal(t.Parameters)
	return b
}
