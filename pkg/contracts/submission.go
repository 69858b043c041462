package contracts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
)

// MaxRejectionMessageBytes bounds the message of a rejection made by the decoders here.
// Messages quote offending input (a key, a value) and are published on the rejected
// subject, so an attacker must not be able to make them as large as the payload.
const MaxRejectionMessageBytes = 512

// rejectWire is [Reject] with the message cut to [MaxRejectionMessageBytes] at a UTF-8
// boundary.
func rejectWire(code RejectCode, format string, args ...any) *Rejection {
	r := Reject(code, format, args...)
	if len(r.Message) > MaxRejectionMessageBytes {
		const ellipsis = "…"
		cut := MaxRejectionMessageBytes - len(ellipsis)
		for cut > 0 && !utf8.RuneStart(r.Message[cut]) {
			cut--
		}
		r.Message = r.Message[:cut] + ellipsis
	}
	return r
}

// MaxCorrelationIDLength bounds a ticket correlation id. The longest id [CorrelationID]
// makes is "client." + a 200-byte run id + "." + a 19-digit step + "." + the 343-byte
// encoding of a 256-byte call id ([EncodeCallID]): 571 bytes, under this.
const MaxCorrelationIDLength = 640

// DecodeSubmission decodes and validates the payload of io.awaken.toolbatch.requested.v1.
// On failure it returns a [*Rejection] whose code is the first problem
// found, checked in this order:
//
//   - too_large: more than [MaxSubmissionBytes];
//   - invalid_utf8: the bytes are not UTF-8;
//   - too_deep: arrays and objects nested deeper than [MaxJSONDepth] (a byte scan done
//     before any parsing, so a hostile 10,000-deep document costs one pass);
//   - invalid_json: not one JSON object, or an object with a duplicated key (which
//     parsers disagree about, and a permission rule must see what the tool sees);
//   - unknown_field: a field name not in the protocol, at any level of the envelope
//     (names match exactly; tool arguments and tool_use inputs are free-form);
//   - invalid_field: a field of the wrong JSON type;
//   - invalid_id: run_id, thread_id or agent.snapshot_id that fails [ValidateID], or a
//     call_id that fails [ValidateCallID];
//   - invalid_step: a missing or negative step;
//   - empty_batch, too_many_calls (more than [MaxCallsPerBatch]), duplicate_call;
//   - invalid_field: a tool id that fails [ValidateToolID] (in calls or agent.tools), a
//     narrowing other than configured/deny_all, a malformed assistant block, or a policy
//     with an unknown behaviour or mode, an empty pattern or a negative duration.
//
// On success the submission is normalised: a missing narrowing becomes configured,
// missing agent tools an empty list, null or missing call arguments {}, and arguments
// sent as a string holding a JSON object that object ([NormalizeCallArguments]). The
// permission-rule grammar of a per-run policy is not checked here; the gate compiles it.
// DecodeSubmission is pure and safe for concurrent use.
func DecodeSubmission(data []byte) (*BatchSubmission, error) {
	var s BatchSubmission
	if rej := decodeWirePayload(data, &s); rej != nil {
		return nil, rej
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, rejectWire(RejectInvalidJSON, "%v", err)
	}
	if err := ValidateID("run_id", s.RunID); err != nil {
		return nil, rejectWire(RejectInvalidID, "%v", err)
	}
	if err := ValidateID("thread_id", s.ThreadID); err != nil {
		return nil, rejectWire(RejectInvalidID, "%v", err)
	}
	if err := ValidateID("agent.snapshot_id", s.Agent.SnapshotID); err != nil {
		return nil, rejectWire(RejectInvalidID, "%v", err)
	}
	for i, c := range s.Calls {
		if err := ValidateCallID(fmt.Sprintf("calls[%d].call_id", i), c.CallID); err != nil {
			return nil, rejectWire(RejectInvalidID, "%v", err)
		}
	}
	if _, ok := top["step"]; !ok {
		return nil, rejectWire(RejectInvalidStep, "step is required")
	}
	if s.Step < 0 {
		return nil, rejectWire(RejectInvalidStep, "step %d is negative", s.Step)
	}
	if len(s.Calls) == 0 {
		return nil, rejectWire(RejectEmptyBatch, "the batch has no calls")
	}
	if len(s.Calls) > MaxCallsPerBatch {
		return nil, rejectWire(RejectTooManyCalls, "the batch has %d calls, more than %d", len(s.Calls), MaxCallsPerBatch)
	}
	seen := make(map[string]int, len(s.Calls))
	for i, c := range s.Calls {
		if j, dup := seen[c.CallID]; dup {
			return nil, rejectWire(RejectDuplicateCall, "calls[%d] and calls[%d] share call_id %q", j, i, c.CallID)
		}
		seen[c.CallID] = i
	}
	for i := range s.Calls {
		c := &s.Calls[i]
		if err := ValidateToolID(c.ToolID); err != nil {
			return nil, rejectWire(RejectInvalidField, "calls[%d].tool_id: %v", i, err)
		}
		// A string that holds no object stays as sent: it is that call's error, which the
		// gate gives the model as the call's result, never the batch's refusal.
		c.Arguments, _ = NormalizeCallArguments(c.Arguments)
	}
	if s.Agent.Tools == nil {
		s.Agent.Tools = []string{}
	}
	for i, id := range s.Agent.Tools {
		if err := ValidateToolID(id); err != nil {
			return nil, rejectWire(RejectInvalidField, "agent.tools[%d]: %v", i, err)
		}
	}
	if !s.Narrowing.Valid() {
		return nil, rejectWire(RejectInvalidField, "narrowing %q is not configured or deny_all", s.Narrowing)
	}
	s.Narrowing = s.Narrowing.Normalize()
	for i, b := range s.Assistant {
		if err := b.Validate(); err != nil {
			return nil, rejectWire(RejectInvalidField, "assistant[%d]: %v", i, err)
		}
	}
	if err := ValidateMetadata(s.Metadata); err != nil {
		return nil, rejectWire(RejectInvalidField, "%v", err)
	}
	if len(s.Tenant) > MaxTenantBytes || !utf8.ValidString(s.Tenant) || strings.IndexFunc(s.Tenant, unicode.IsControl) >= 0 {
		return nil, rejectWire(RejectInvalidField, "tenant must be at most %d bytes of UTF-8 without control characters", MaxTenantBytes)
	}
	if s.Policy != nil {
		if len(s.Policy.Limits) > 0 {
			// Limits are accounted in a shared ledger: one a submission brings could key a
			// tenant's or the global ledger, so they are the host's alone.
			return nil, rejectWire(RejectInvalidPolicy, "policy.limits: limits belong to the host policy, a run policy may not carry any")
		}
		if err := checkPolicyShape(s.Policy); err != nil {
			return nil, rejectWire(RejectInvalidField, "policy: %v", err)
		}
		// A pattern that cannot compile would otherwise block every call of the run with
		// "invalid run policy" at the gate; refusing the batch tells the platform now.
		if _, err := CompilePolicy(*s.Policy); err != nil {
			return nil, rejectWire(RejectInvalidPolicy, "%v", err)
		}
	}
	return &s, nil
}

// MaxTenantBytes bounds a submission's tenant.
const MaxTenantBytes = 128

// Bounds of a submission's metadata.
const (
	MaxMetadataEntries    = 16
	MaxMetadataKeyBytes   = 64
	MaxMetadataValueBytes = 512
)

// ValidateMetadata checks a submission's metadata against its bounds: at most
// [MaxMetadataEntries] keys of 1 to [MaxMetadataKeyBytes] bytes of a-z 0-9 _ . -, each
// value at most [MaxMetadataValueBytes] bytes of valid UTF-8 without control characters.
func ValidateMetadata(md map[string]string) error {
	if len(md) > MaxMetadataEntries {
		return fmt.Errorf("metadata has %d keys, more than %d", len(md), MaxMetadataEntries)
	}
	for k, v := range md {
		if k == "" || len(k) > MaxMetadataKeyBytes || strings.IndexFunc(k, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
		}) >= 0 {
			return fmt.Errorf("metadata key %q must have 1 to %d bytes of a-z 0-9 _ . -", k, MaxMetadataKeyBytes)
		}
		if len(v) > MaxMetadataValueBytes {
			return fmt.Errorf("metadata %s has %d bytes, more than %d", k, len(v), MaxMetadataValueBytes)
		}
		if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return fmt.Errorf("metadata %s must be UTF-8 without control characters", k)
		}
	}
	return nil
}

// checkPolicyShape checks what a per-run policy must satisfy whatever its rule grammar:
// known behaviours and mode, non-empty patterns, non-negative durations.
func checkPolicyShape(p *PolicyConfig) error {
	knownBehavior := func(b PolicyBehavior) bool {
		return b == BehaviorAllow || b == BehaviorAsk || b == BehaviorDeny || b == BehaviorSchedule
	}
	if p.DefaultBehavior != "" && !knownBehavior(p.DefaultBehavior) {
		return fmt.Errorf("default_behavior %q is not allow, ask, deny or schedule", p.DefaultBehavior)
	}
	switch p.Mode {
	case "", ModeDefault, ModeAcceptEdits, ModePlan, ModeBypassPermissions:
	default:
		return fmt.Errorf("mode %q is not default, acceptEdits, plan or bypassPermissions", p.Mode)
	}
	for i, r := range p.Rules {
		if strings.TrimSpace(r.Pattern) == "" {
			return fmt.Errorf("rules[%d]: empty pattern", i)
		}
		if !knownBehavior(r.Behavior) {
			return fmt.Errorf("rules[%d]: behavior %q is not allow, ask, deny or schedule", i, r.Behavior)
		}
		if r.Delay < 0 || r.Timeout < 0 {
			return fmt.Errorf("rules[%d]: negative delay or timeout", i)
		}
	}
	return nil
}

// Hash is the SHA-256 (lower-case hex) of the canonical JSON encoding of s: the encoding
// of the decoded value with object keys sorted, no insignificant whitespace, strings
// escaped uniformly and numbers kept as written. Resubmitting the same content with other
// whitespace or key order gives the same hash; any change of content gives another. It
// is meant for decoded submissions, whose raw fields are always valid JSON; in a
// hand-built submission a raw field that is not valid JSON is hashed as a marked string
// of its bytes, so distinct contents still hash differently.
func (s *BatchSubmission) Hash() string {
	b, err := json.Marshal(s)
	if err != nil {
		b, err = json.Marshal(hashSafeSubmission(s))
	}
	if err == nil {
		if c, cerr := wireCanonicalJSON(b); cerr == nil {
			b = c
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashSafeSubmission copies s with every raw field that is not valid JSON replaced by a
// marked JSON string of its bytes.
func hashSafeSubmission(s *BatchSubmission) *BatchSubmission {
	safe := func(raw json.RawMessage) json.RawMessage {
		if len(raw) == 0 || json.Valid(raw) {
			return raw
		}
		q, _ := json.Marshal("\x00invalid-json:" + string(raw))
		return q
	}
	var safeBlocks func([]ContentBlock) []ContentBlock
	safeBlocks = func(blocks []ContentBlock) []ContentBlock {
		if blocks == nil {
			return nil
		}
		out := slices.Clone(blocks)
		for i := range out {
			out[i].Input = safe(out[i].Input)
			out[i].Content = safeBlocks(out[i].Content)
		}
		return out
	}
	c := *s
	c.Calls = slices.Clone(s.Calls)
	for i := range c.Calls {
		c.Calls[i].Arguments = safe(c.Calls[i].Arguments)
	}
	c.Assistant = safeBlocks(s.Assistant)
	return &c
}

// DecodeResumeCommand decodes and validates the payload of io.awaken.ticket.resume.v1
// with the same envelope checks as [DecodeSubmission] (size, UTF-8, depth, JSON,
// duplicate keys, unknown fields, field types), then: run_id, thread_id and snapshot_id
// must pass [ValidateID] and correlation_id must be a well-formed correlation id
// (invalid_id); result must hold exactly one of permission or tool_result; a permission
// decision is allow (with an optional note, no reason) or deny (with an optional reason,
// no note; arguments only on an allow); the actor is at most [MaxActorLength] bytes; a
// tool_result must be a valid [ToolOutput] (its call_id: invalid_id). Whether edited
// arguments fit the tool is the gate's to decide (invalid_arguments). Whether
// the command matches its ticket is decided later, against the committed ticket.
func DecodeResumeCommand(data []byte) (*ResumeCommand, error) {
	var c ResumeCommand
	if rej := decodeWirePayload(data, &c); rej != nil {
		return nil, rej
	}
	if err := validateCorrelationID(c.CorrelationID); err != nil {
		return nil, rejectWire(RejectInvalidID, "%v", err)
	}
	if len(c.Actor) > MaxActorLength {
		return nil, rejectWire(RejectInvalidField, "actor is longer than %d bytes", MaxActorLength)
	}
	for _, id := range []struct{ field, value string }{
		{"run_id", c.RunID}, {"thread_id", c.ThreadID}, {"snapshot_id", c.SnapshotID},
	} {
		if err := ValidateID(id.field, id.value); err != nil {
			return nil, rejectWire(RejectInvalidID, "%v", err)
		}
	}
	switch r := c.Result; {
	case r.Permission != nil && r.ToolResult != nil:
		return nil, rejectWire(RejectInvalidField, "result holds both permission and tool_result")
	case r.Permission != nil:
		p := r.Permission
		switch p.Decision {
		case DecisionAllow:
			if p.Reason != "" {
				return nil, rejectWire(RejectInvalidField, "result.permission: an allow carries a note, not a reason")
			}
		case DecisionDeny:
			if p.Note != "" {
				return nil, rejectWire(RejectInvalidField, "result.permission: a deny carries a reason, not a note")
			}
			if p.HasArguments() {
				return nil, rejectWire(RejectInvalidField, "result.permission: a deny carries no arguments")
			}
		default:
			return nil, rejectWire(RejectInvalidField, "result.permission.decision %q is not allow or deny", p.Decision)
		}
	case r.ToolResult != nil:
		out := r.ToolResult
		if out.Content == nil {
			out.Content = []ContentBlock{}
		}
		if err := out.Validate(); err != nil {
			if errors.Is(err, ErrInvalidID) {
				return nil, rejectWire(RejectInvalidID, "result.tool_result: %v", err)
			}
			return nil, rejectWire(RejectInvalidField, "result.tool_result: %v", err)
		}
	default:
		return nil, rejectWire(RejectInvalidField, "result holds neither permission nor tool_result")
	}
	return &c, nil
}

// DecodeRunCancel decodes and validates the payload of io.awaken.run.cancel.v1 with the
// envelope checks of [DecodeSubmission]; run_id must pass [ValidateID].
func DecodeRunCancel(data []byte) (*RunCancel, error) {
	var c RunCancel
	if rej := decodeWirePayload(data, &c); rej != nil {
		return nil, rej
	}
	if err := ValidateID("run_id", c.RunID); err != nil {
		return nil, rejectWire(RejectInvalidID, "%v", err)
	}
	return &c, nil
}

// DecodeCallCancel decodes and validates the payload of io.awaken.call.cancel.v1 with the
// envelope checks of [DecodeSubmission]; operation_id must be one [OperationID] makes.
func DecodeCallCancel(data []byte) (*CallCancel, error) {
	var c CallCancel
	if rej := decodeWirePayload(data, &c); rej != nil {
		return nil, rej
	}
	if _, _, _, err := ParseOperationID(c.OperationID); err != nil {
		return nil, rejectWire(RejectInvalidID, "%v", err)
	}
	return &c, nil
}

// validateCorrelationID accepts what [CorrelationID] and permission policies make: 1 to
// [MaxCorrelationIDLength] bytes of A-Z a-z 0-9 _ - = and '.', with no empty dot-separated
// part, so the id is safe as a KV key and as subject tokens.
func validateCorrelationID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: correlation_id is empty", ErrInvalidID)
	}
	if len(id) > MaxCorrelationIDLength {
		return fmt.Errorf("%w: correlation_id is longer than %d bytes", ErrInvalidID, MaxCorrelationIDLength)
	}
	for _, part := range strings.Split(id, ".") {
		if part == "" {
			return fmt.Errorf("%w: correlation_id %q has an empty dot-separated part", ErrInvalidID, id)
		}
		// '=' marks an encoded call id ([EncodeCallID]).
		if !subjectSafe(strings.TrimPrefix(part, callIDEncodedMark)) {
			return fmt.Errorf("%w: correlation_id %q has a character outside A-Z a-z 0-9 _ - = .", ErrInvalidID, id)
		}
	}
	return nil
}

// decodeWirePayload runs the envelope checks shared by every inbound payload and decodes
// data into v (a pointer to a struct). See [DecodeSubmission] for the order.
func decodeWirePayload(data []byte, v any) *Rejection {
	if len(data) > MaxSubmissionBytes {
		return rejectWire(RejectTooLarge, "payload is %d bytes, more than %d", len(data), MaxSubmissionBytes)
	}
	if !utf8.Valid(data) {
		return rejectWire(RejectInvalidUTF8, "payload is not valid UTF-8")
	}
	if depth := jsonNestingDepth(data, MaxJSONDepth); depth > MaxJSONDepth {
		return rejectWire(RejectTooDeep, "payload nests arrays and objects deeper than %d", MaxJSONDepth)
	}
	if !json.Valid(data) {
		return rejectWire(RejectInvalidJSON, "payload is not valid JSON")
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return rejectWire(RejectInvalidJSON, "payload is not a JSON object")
	}
	if rej := scanWireKeys(data, reflect.TypeOf(v)); rej != nil {
		return rej
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return rejectWire(RejectInvalidField, "%s", DescribeDecodeError(err))
	}
	return nil
}

// jsonNestingDepth returns the maximum nesting of arrays and objects in data, stopping as
// soon as it exceeds limit. It is a single iterative byte scan that skips string contents,
// so it is cheap and cannot overflow a stack whatever the input.
func jsonNestingDepth(data []byte, limit int) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// scanWireKeys walks the tokens of data (valid JSON) once, alongside the Go type root it
// will decode into, and reports the first duplicated key in any object (invalid_json,
// which takes precedence wherever it occurs) or else the first object key that is not
// the exact JSON name of a field of the struct it decodes into (unknown_field). Raw JSON
// fields, interfaces and types with their own UnmarshalJSON are opaque: their keys are
// checked for duplicates only. The walk is iterative and linear in the input.
func scanWireKeys(data []byte, root reflect.Type) *Rejection {
	type frame struct {
		object    bool
		keys      map[string]struct{}
		expectKey bool
		fields    map[string]reflect.Type // struct: known fields; nil otherwise
		elem      reflect.Type            // map or slice element; nil when opaque
		valueType reflect.Type            // type of the value after the current key
		key       string                  // current key (objects)
		index     int                     // index of the current element (arrays)
	}
	fieldCache := map[reflect.Type]map[string]reflect.Type{}
	structFields := func(t reflect.Type) map[string]reflect.Type {
		if m, ok := fieldCache[t]; ok {
			return m
		}
		m := typeschema.JSONFields(t)
		fieldCache[t] = m
		return m
	}
	var stack []*frame
	pathOf := func(extraKey string) string {
		var b strings.Builder
		for i, f := range stack {
			var seg string
			switch {
			case i == len(stack)-1 && f.object:
				seg = extraKey
			case f.object:
				seg = f.key
			default:
				fmt.Fprintf(&b, "[%d]", f.index)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg)
		}
		return b.String()
	}
	var unknown *Rejection
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return unknown
		}
		if err != nil {
			return rejectWire(RejectInvalidJSON, "payload is not valid JSON: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.object && top.expectKey {
			key, _ := tok.(string)
			if _, dup := top.keys[key]; dup {
				return rejectWire(RejectInvalidJSON, "payload repeats the key %q in one object", pathOf(key))
			}
			top.keys[key] = struct{}{}
			top.expectKey, top.key, top.valueType = false, key, top.elem
			if top.fields != nil {
				ft, known := top.fields[key]
				if !known && unknown == nil {
					unknown = rejectWire(RejectUnknownField, "unknown field %q", pathOf(key))
				}
				top.valueType = ft
			}
			continue
		}
		// tok starts a value: find the Go type it decodes into.
		var vt reflect.Type
		switch {
		case top == nil:
			vt = root
		case top.object:
			vt = top.valueType
			top.expectKey = true
		default:
			top.index++
			vt = top.elem
		}
		d, isDelim := tok.(json.Delim)
		if !isDelim {
			continue
		}
		for vt != nil && vt.Kind() == reflect.Pointer {
			vt = vt.Elem()
		}
		if vt != nil && (vt == typeRawMessage || vt.Kind() == reflect.Interface || reflect.PointerTo(vt).Implements(typeJSONUnmarshaler)) {
			vt = nil // opaque: validates itself
		}
		f := &frame{index: -1}
		if d == '{' {
			f.object, f.keys, f.expectKey = true, map[string]struct{}{}, true
			switch {
			case vt != nil && vt.Kind() == reflect.Struct:
				f.fields = structFields(vt)
			case vt != nil && vt.Kind() == reflect.Map:
				f.elem = vt.Elem()
			}
		} else if vt != nil && (vt.Kind() == reflect.Slice || vt.Kind() == reflect.Array) {
			f.elem = vt.Elem()
		}
		stack = append(stack, f)
	}
}

// Types the wire scan treats as opaque: they check their own contents when decoded.
var (
	typeRawMessage      = reflect.TypeFor[json.RawMessage]()
	typeJSONUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// DescribeDecodeError says what an encoding/json decoding failure is about, naming the
// field of a type mismatch ("field \"n\": want int, got string"). A wire payload's
// rejection and a typed tool's invalid-arguments error both word a wrong field so.
func DescribeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	}
	return err.Error()
}
