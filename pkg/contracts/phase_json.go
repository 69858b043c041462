package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// This file gives [ToolCallPhase] its constructors, its terminal test, its structural check
// and its externally tagged JSON form. The transitions between phases live
// in call_transitions.go.

// WaitKindApprovalAlias is the legacy spelling of [WaitToolPermission] that decoding still
// accepts (the original's serde alias "Approval"). Encoding always writes "tool_permission".
const WaitKindApprovalAlias = "approval"

// RequestedPhase returns the phase of a call that is durable but whose executor has not
// been entered.
func RequestedPhase() ToolCallPhase { return ToolCallPhase{Kind: PhaseRequested} }

// ExecutingPhase returns the phase of a call whose executor may have produced an effect,
// in its attempt-th attempt. A crash in this phase is resolved by the pinned recovery
// policy, never by silently restarting as Requested. Attempts count from 1.
func ExecutingPhase(attempt uint16) ToolCallPhase {
	return ToolCallPhase{Kind: PhaseExecuting, Attempt: attempt}
}

// AwaitingPhase returns the phase of a call parked on a durable wait identified by kind
// and correlation id. Only a resume carrying exactly this kind and correlation may move
// the call into execution.
func AwaitingPhase(kind ToolWaitKind, correlationID string) ToolCallPhase {
	return ToolCallPhase{Kind: PhaseAwaiting, Wait: &ToolWait{Kind: kind, CorrelationID: correlationID}}
}

// CompletedPhase returns the terminal phase holding out, the result committed before the
// batch publishes. out is deep-copied so later changes by the caller cannot reach it.
func CompletedPhase(out ToolOutput) ToolCallPhase {
	o := batchCloneOutput(out)
	return ToolCallPhase{Kind: PhaseCompleted, Output: &o}
}

// IndeterminatePhase returns the terminal phase of a call whose external outcome cannot be
// determined safely. It publishes as an error result and needs external
// reconciliation by operation id.
func IndeterminatePhase(reason string) ToolCallPhase {
	return ToolCallPhase{Kind: PhaseIndeterminate, Reason: reason}
}

// IsTerminal reports whether p is Completed or Indeterminate. A terminal call is never
// entered again; only its staged result state may still change.
func (p ToolCallPhase) IsTerminal() bool {
	return p.Kind == PhaseCompleted || p.Kind == PhaseIndeterminate
}

// validWaitKind reports whether k is one of the four wait kinds.
func validWaitKind(k ToolWaitKind) bool {
	switch k {
	case WaitToolPermission, WaitDelegation, WaitScheduledAction, WaitExternalResult:
		return true
	}
	return false
}

// check verifies that p is structurally well-formed: a known kind and only the field of
// that kind set (Executing: Attempt ≥ 1; Awaiting: a known wait kind and a non-empty
// correlation; Completed: an output). It knows nothing of the call p belongs to, so the
// attempt budget and the output's call id are checked by [CallRecord.Validate].
// Errors wrap [ErrInvalidPersistedState], or [ErrEmptyWaitCorrelation] for an empty
// correlation.
func (p ToolCallPhase) check() error {
	stray := func(what string) error {
		return fmt.Errorf("%w: %s phase carries %s", ErrInvalidPersistedState, p.Kind, what)
	}
	if p.Kind != PhaseExecuting && p.Attempt != 0 {
		return stray("an attempt")
	}
	if p.Kind != PhaseAwaiting && p.Wait != nil {
		return stray("a wait")
	}
	if p.Kind != PhaseCompleted && p.Output != nil {
		return stray("an output")
	}
	if p.Kind != PhaseIndeterminate && p.Reason != "" {
		return stray("a reason")
	}
	switch p.Kind {
	case PhaseRequested, PhaseIndeterminate:
		return nil
	case PhaseExecuting:
		if p.Attempt == 0 {
			return fmt.Errorf("%w: Executing attempt must be at least 1", ErrInvalidPersistedState)
		}
		return nil
	case PhaseAwaiting:
		if p.Wait == nil {
			return fmt.Errorf("%w: Awaiting phase has no wait", ErrInvalidPersistedState)
		}
		if !validWaitKind(p.Wait.Kind) {
			return fmt.Errorf("%w: unknown wait kind %q", ErrInvalidPersistedState, p.Wait.Kind)
		}
		if p.Wait.CorrelationID == "" {
			return fmt.Errorf("%w: Awaiting %s wait", ErrEmptyWaitCorrelation, p.Wait.Kind)
		}
		return nil
	case PhaseCompleted:
		if p.Output == nil {
			return fmt.Errorf("%w: Completed phase has no output", ErrInvalidPersistedState)
		}
		return nil
	case "":
		return fmt.Errorf("%w: tool call phase is unset", ErrInvalidPersistedState)
	default:
		return fmt.Errorf("%w: unknown tool call phase %q", ErrInvalidPersistedState, p.Kind)
	}
}

// phaseExecutingWire, phaseAwaitingWire and phaseIndeterminateWire are the bodies of the
// tagged variants.
type phaseExecutingWire struct {
	Attempt uint16 `json:"attempt"`
}

type phaseAwaitingWire struct {
	Wait ToolWait `json:"wait"`
}

type phaseIndeterminateWire struct {
	Reason string `json:"reason"`
}

// MarshalJSON writes p externally tagged like the original serde form: "Requested",
// {"Executing":{"attempt":1}}, {"Awaiting":{"wait":{"kind":"tool_permission",
// "correlation_id":"…"}}}, {"Completed":{…ToolOutput…}} or {"Indeterminate":{"reason":"…"}}.
// It refuses a malformed phase (see [ToolCallPhase.UnmarshalJSON]) so that everything it
// writes decodes again.
func (p ToolCallPhase) MarshalJSON() ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("contracts: encode tool call phase: %w", err)
	}
	var body any
	switch p.Kind {
	case PhaseRequested:
		return []byte(`"Requested"`), nil
	case PhaseExecuting:
		body = phaseExecutingWire{Attempt: p.Attempt}
	case PhaseAwaiting:
		body = phaseAwaitingWire{Wait: *p.Wait}
	case PhaseCompleted:
		body = p.Output
	case PhaseIndeterminate:
		body = phaseIndeterminateWire{Reason: p.Reason}
	}
	return json.Marshal(map[string]any{string(p.Kind): body})
}

// UnmarshalJSON reads the externally tagged form written by [ToolCallPhase.MarshalJSON].
// It fails closed: null, an unknown variant, more than one variant key, a missing or
// unknown field inside a variant, Executing attempt 0, an unknown wait kind or an empty
// correlation are all errors (wrapping [ErrInvalidPersistedState] or
// [ErrEmptyWaitCorrelation]). The wait kind "approval" is accepted as an alias of
// "tool_permission". Field names match exactly (not case-insensitively).
func (p *ToolCallPhase) UnmarshalJSON(b []byte) error {
	next, err := decodePhase(b)
	if err != nil {
		return fmt.Errorf("contracts: decode tool call phase: %w", err)
	}
	*p = next
	return nil
}

func decodePhase(b []byte) (ToolCallPhase, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ToolCallPhase{}, fmt.Errorf("%w: empty input", ErrInvalidPersistedState)
	}
	switch b[0] {
	case '"':
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return ToolCallPhase{}, fmt.Errorf("%w: %v", ErrInvalidPersistedState, err)
		}
		if name != string(PhaseRequested) {
			return ToolCallPhase{}, fmt.Errorf("%w: %q is not a unit variant (only \"Requested\" is)", ErrInvalidPersistedState, name)
		}
		return RequestedPhase(), nil
	case '{':
	default:
		return ToolCallPhase{}, fmt.Errorf("%w: want \"Requested\" or a single-key object, got %.40s", ErrInvalidPersistedState, b)
	}
	if p, ok := decodePhasePlain(b); ok {
		return p, nil
	}
	return decodePhaseObject(b)
}

// decodePhaseObject is the general path of decodePhase for a tagged variant.
func decodePhaseObject(b []byte) (ToolCallPhase, error) {
	fields, err := batchDecodeObject(b, nil, nil)
	if err != nil {
		return ToolCallPhase{}, err
	}
	if len(fields) != 1 {
		return ToolCallPhase{}, fmt.Errorf("%w: want exactly one variant key, got %d", ErrInvalidPersistedState, len(fields))
	}
	var (
		variant string
		body    json.RawMessage
	)
	for k, v := range fields {
		variant, body = k, v
	}
	var p ToolCallPhase
	switch PhaseKind(variant) {
	case PhaseExecuting:
		attempt, err := decodeOnlyField[uint16](body, "Executing", "attempt")
		if err != nil {
			return ToolCallPhase{}, err
		}
		p = ExecutingPhase(attempt)
	case PhaseAwaiting:
		f, err := batchDecodeObject(body, []string{"wait"}, nil)
		if err != nil {
			return ToolCallPhase{}, fmt.Errorf("Awaiting: %w", err)
		}
		w, err := batchDecodeObject(f["wait"], []string{"kind", "correlation_id"}, nil)
		if err != nil {
			return ToolCallPhase{}, fmt.Errorf("Awaiting.wait: %w", err)
		}
		var kind, corr string
		if err := batchDecodeValue(w["kind"], &kind); err != nil {
			return ToolCallPhase{}, fmt.Errorf("%w: Awaiting.wait.kind: %v", ErrInvalidPersistedState, err)
		}
		if err := batchDecodeValue(w["correlation_id"], &corr); err != nil {
			return ToolCallPhase{}, fmt.Errorf("%w: Awaiting.wait.correlation_id: %v", ErrInvalidPersistedState, err)
		}
		if kind == WaitKindApprovalAlias {
			kind = string(WaitToolPermission)
		}
		p = AwaitingPhase(ToolWaitKind(kind), corr)
	case PhaseCompleted:
		if _, err := batchDecodeObject(body, toolOutputRequired, toolOutputOptional); err != nil {
			return ToolCallPhase{}, fmt.Errorf("Completed: %w", err)
		}
		var out ToolOutput
		if err := json.Unmarshal(body, &out); err != nil {
			return ToolCallPhase{}, fmt.Errorf("%w: Completed: %v", ErrInvalidPersistedState, err)
		}
		p = ToolCallPhase{Kind: PhaseCompleted, Output: &out}
	case PhaseIndeterminate:
		reason, err := decodeOnlyField[string](body, "Indeterminate", "reason")
		if err != nil {
			return ToolCallPhase{}, err
		}
		p = IndeterminatePhase(reason)
	default:
		return ToolCallPhase{}, fmt.Errorf("%w: unknown tool call phase variant %q", ErrInvalidPersistedState, variant)
	}
	if err := p.check(); err != nil {
		return ToolCallPhase{}, err
	}
	return p, nil
}

// decodePhasePlain decodes the two phases every call record passes through, Executing and
// Completed, as the encoder writes them, without the general path's json.Decoder; it
// reports false for anything else, or anything the general path would refuse, which the
// general path then decodes or refuses with its error.
func decodePhasePlain(b []byte) (ToolCallPhase, bool) {
	keys, vals, ok := objectFields(b)
	if !ok || len(keys) != 1 {
		return ToolCallPhase{}, false
	}
	fields, body, ok := validObjectFields(vals[0])
	if !ok {
		return ToolCallPhase{}, false
	}
	var p ToolCallPhase
	switch PhaseKind(keys[0]) {
	case PhaseExecuting:
		if len(fields) != 1 || fields[0] != "attempt" {
			return ToolCallPhase{}, false
		}
		attempt, ok := plainUint16(body[0])
		if !ok {
			return ToolCallPhase{}, false
		}
		p = ExecutingPhase(attempt)
	case PhaseCompleted:
		if !fieldsWithin(fields, toolOutputRequired, toolOutputOptional) {
			return ToolCallPhase{}, false
		}
		var out ToolOutput
		if err := json.Unmarshal(vals[0], &out); err != nil {
			return ToolCallPhase{}, false
		}
		p = ToolCallPhase{Kind: PhaseCompleted, Output: &out}
	default:
		return ToolCallPhase{}, false
	}
	if p.check() != nil {
		return ToolCallPhase{}, false
	}
	return p, true
}

// toolOutputRequired and toolOutputOptional are the JSON fields of [ToolOutput] that a
// stored Completed phase must and may hold: read from the type's own tags (a field that
// is omitted when empty is optional), so that every field the encoder writes is one the
// strict decoder accepts, including any field added to ToolOutput later.
var toolOutputRequired, toolOutputOptional = jsonFieldsOf(reflect.TypeFor[ToolOutput]())

// jsonFieldsOf returns the JSON names of the exported fields of struct type t, split into
// those always written and those written only when set (omitempty or omitzero).
func jsonFieldsOf(t reflect.Type) (required, optional []string) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero") {
			optional = append(optional, name)
		} else {
			required = append(required, name)
		}
	}
	return required, optional
}

// decodeOnlyField decodes the body of a variant whose object has the one field name, and
// returns the field's value. Errors name the variant and wrap [ErrInvalidPersistedState].
func decodeOnlyField[T any](body json.RawMessage, variant, name string) (T, error) {
	var v T
	f, err := batchDecodeObject(body, []string{name}, nil)
	if err != nil {
		return v, fmt.Errorf("%s: %w", variant, err)
	}
	if err := batchDecodeValue(f[name], &v); err != nil {
		return v, fmt.Errorf("%w: %s.%s: %v", ErrInvalidPersistedState, variant, name, err)
	}
	return v, nil
}

// batchDecodeObject decodes b as one JSON object and checks its keys exactly (case
// sensitively): every key in required must be present, and with required or optional
// non-nil no other key may appear. With both nil any keys are accepted. A duplicate key is
// an error, so a record cannot smuggle a second value past a first one. Errors wrap
// [ErrInvalidPersistedState].
func batchDecodeObject(b []byte, required, optional []string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPersistedState, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: want a JSON object, got %.40s", ErrInvalidPersistedState, bytes.TrimSpace(b))
	}
	strict := required != nil || optional != nil
	allowed := make(map[string]bool, len(required)+len(optional))
	for _, k := range required {
		allowed[k] = true
	}
	for _, k := range optional {
		allowed[k] = true
	}
	fields := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidPersistedState, err)
		}
		key, _ := tok.(string)
		if strict && !allowed[key] {
			return nil, fmt.Errorf("%w: unknown field %q", ErrInvalidPersistedState, key)
		}
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("%w: duplicate field %q", ErrInvalidPersistedState, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: field %q: %v", ErrInvalidPersistedState, key, err)
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPersistedState, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after object", ErrInvalidPersistedState)
	}
	for _, k := range required {
		if _, ok := fields[k]; !ok {
			return nil, fmt.Errorf("%w: missing field %q", ErrInvalidPersistedState, k)
		}
	}
	return fields, nil
}

// batchDecodeValue decodes raw into v, refusing a JSON null: a required field that is null
// is as absent as a missing one, and encoding/json would silently leave v at its zero
// value.
func batchDecodeValue(raw json.RawMessage, v any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null is not allowed")
	}
	return json.Unmarshal(raw, v)
}
