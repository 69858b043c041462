package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// DefaultMaxAttempts is the attempt budget of a policy that names none.
const DefaultMaxAttempts uint16 = 3

var (
	// ErrZeroAttempts is returned for a recovery policy with max_attempts 0: a call that
	// may never be attempted cannot run, so the policy fails closed instead of meaning
	// "unlimited".
	ErrZeroAttempts = errors.New("recovery policy: max_attempts must be at least 1")
	// ErrUnsupportedRecovery is wrapped by [*UnsupportedRecoveryError].
	ErrUnsupportedRecovery = errors.New("unsupported recovery mode")
	// ErrInvalidRecoveryMode is returned for a recovery mode outside the four known ones.
	ErrInvalidRecoveryMode = errors.New("invalid recovery mode")
	// ErrInvalidCapability is returned for a recovery capability outside the four known ones.
	ErrInvalidCapability = errors.New("invalid recovery capability")
)

// UnsupportedRecoveryError says that a configured recovery mode would widen what the
// executable can safely do after a crash. It wraps [ErrUnsupportedRecovery].
type UnsupportedRecoveryError struct {
	Mode       ToolRecoveryMode
	Capability ToolRecoveryCapability
}

// Error names the mode and the capability that does not support it.
func (e *UnsupportedRecoveryError) Error() string {
	return fmt.Sprintf("%s: mode %s is not supported by tool capability %s",
		ErrUnsupportedRecovery, e.Mode, e.Capability)
}

// Unwrap lets errors.Is match [ErrUnsupportedRecovery].
func (e *UnsupportedRecoveryError) Unwrap() error { return ErrUnsupportedRecovery }

// Valid reports whether m is one of the four recovery modes.
func (m ToolRecoveryMode) Valid() bool {
	switch m {
	case ModeNeverReplay, ModeReplaySafe, ModeIdempotent, ModeDurableRequest:
		return true
	}
	return false
}

// Valid reports whether c is one of the four recovery capabilities. The empty string is
// not valid; code that reads a capability from configuration should use
// [ParseRecoveryCapability], which maps it to the default.
func (c ToolRecoveryCapability) Valid() bool {
	switch c {
	case CapabilityNonRecoverable, CapabilityReplaySafe, CapabilityIdempotent, CapabilityDurableRequest:
		return true
	}
	return false
}

// ParseRecoveryCapability reads a capability name. The empty string yields
// [CapabilityNonRecoverable], the fail-closed default; an unknown name is an error
// wrapping [ErrInvalidCapability].
func ParseRecoveryCapability(s string) (ToolRecoveryCapability, error) {
	return parseName(s, CapabilityNonRecoverable, ErrInvalidCapability, "non_recoverable, replay_safe, idempotent or durable_request")
}

// ParseRecoveryMode reads a mode name. The empty string yields [ModeNeverReplay], the
// default; an unknown name is an error wrapping [ErrInvalidRecoveryMode].
func ParseRecoveryMode(s string) (ToolRecoveryMode, error) {
	return parseName(s, ModeNeverReplay, ErrInvalidRecoveryMode, "never_replay, replay_safe, idempotent or durable_request")
}

// parseName reads a name of the string enum T: the empty string is def, a name T
// accepts as Valid is itself, and any other is an error wrapping invalid that lists the
// names wanted.
func parseName[T interface {
	~string
	Valid() bool
}](s string, def T, invalid error, wanted string) (T, error) {
	if s == "" {
		return def, nil
	}
	if v := T(s); v.Valid() {
		return v, nil
	}
	return "", fmt.Errorf("%w: %q (want %s)", invalid, s, wanted)
}

// orNonRecoverable maps anything that is not a known capability to the fail-closed
// default, the same default a tool gets when it declares nothing.
func (c ToolRecoveryCapability) orNonRecoverable() ToolRecoveryCapability {
	if c.Valid() {
		return c
	}
	return CapabilityNonRecoverable
}

// DefaultRecoveryPolicy is {never_replay, 3}: a call found Executing after a crash is
// never invoked again.
func DefaultRecoveryPolicy() ToolRecoveryPolicy {
	return ToolRecoveryPolicy{Mode: ModeNeverReplay, MaxAttempts: DefaultMaxAttempts}
}

// DurableRequestPolicy is {durable_request, 3}, the policy every delegation call is
// pinned to: recovery reconnects to the same child instead of creating another.
func DurableRequestPolicy() ToolRecoveryPolicy {
	return ToolRecoveryPolicy{Mode: ModeDurableRequest, MaxAttempts: DefaultMaxAttempts}
}

// NewRecoveryPolicy builds a policy, failing with [ErrZeroAttempts] for maxAttempts 0
// and with [ErrInvalidRecoveryMode] for an unknown mode.
func NewRecoveryPolicy(mode ToolRecoveryMode, maxAttempts uint16) (ToolRecoveryPolicy, error) {
	p := ToolRecoveryPolicy{Mode: mode, MaxAttempts: maxAttempts}
	if err := p.check(); err != nil {
		return ToolRecoveryPolicy{}, err
	}
	return p, nil
}

func (p ToolRecoveryPolicy) check() error {
	if !p.Mode.Valid() {
		return fmt.Errorf("%w: %q", ErrInvalidRecoveryMode, p.Mode)
	}
	if p.MaxAttempts == 0 {
		return ErrZeroAttempts
	}
	return nil
}

// supportedBy is the single support rule: never_replay is always supported, any other
// mode only by the capability of the same name. There is no ordering between modes, so
// idempotent is not supported by a replay_safe capability nor the other way round.
func (m ToolRecoveryMode) supportedBy(c ToolRecoveryCapability) bool {
	if m == ModeNeverReplay {
		return true
	}
	return string(m) == string(c.orNonRecoverable())
}

// Validate checks p against the effective capability of the executable that will run the
// call. It fails with [ErrZeroAttempts] or [ErrInvalidRecoveryMode] for a malformed policy
// (the zero value included), and with an [*UnsupportedRecoveryError] when the mode is
// neither never_replay nor exactly capability. A capability that is not one of the four
// known values counts as non_recoverable. Validate is pure; call it before every entry
// into an executor, because configuration can only match or reduce capability.
func (p ToolRecoveryPolicy) Validate(capability ToolRecoveryCapability) error {
	if err := p.check(); err != nil {
		return err
	}
	if !p.Mode.supportedBy(capability) {
		return &UnsupportedRecoveryError{Mode: p.Mode, Capability: capability}
	}
	return nil
}

// UnmarshalJSON reads {"mode":…,"max_attempts":…}. A missing (or null) field takes its
// default (never_replay, 3), so {} and null decode to [DefaultRecoveryPolicy]. It rejects
// max_attempts 0, an unknown mode and unknown fields: a policy that cannot be read exactly
// must not silently become a more permissive one.
func (p *ToolRecoveryPolicy) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*p = DefaultRecoveryPolicy()
		return nil
	}
	if out, ok := decodeRecoveryPlain(data); ok {
		*p = out
		return nil
	}
	out, err := decodeRecoveryGeneral(data)
	if err != nil {
		return err
	}
	*p = out
	return nil
}

// decodeRecoveryGeneral is the general path of [ToolRecoveryPolicy.UnmarshalJSON].
func decodeRecoveryGeneral(data []byte) (ToolRecoveryPolicy, error) {
	var aux struct {
		Mode        *ToolRecoveryMode `json:"mode"`
		MaxAttempts *uint16           `json:"max_attempts"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return ToolRecoveryPolicy{}, fmt.Errorf("recovery policy: %w", err)
	}
	out := DefaultRecoveryPolicy()
	if aux.Mode != nil {
		out.Mode = *aux.Mode
	}
	if aux.MaxAttempts != nil {
		out.MaxAttempts = *aux.MaxAttempts
	}
	if err := out.check(); err != nil {
		return ToolRecoveryPolicy{}, fmt.Errorf("recovery policy: %w", err)
	}
	return out, nil
}

// decodeRecoveryPlain decodes a recovery policy as the encoder writes it (a string mode and
// an integer max_attempts, each at most once, nothing else) without the general path's
// json.Decoder, which every read of a call record would pay; it reports false for
// anything else, which the general path then decodes or refuses.
func decodeRecoveryPlain(data []byte) (ToolRecoveryPolicy, bool) {
	keys, vals, ok := objectFields(data)
	if !ok || !fieldsWithin(keys, nil, []string{"mode", "max_attempts"}) {
		return ToolRecoveryPolicy{}, false
	}
	out := DefaultRecoveryPolicy()
	for i, k := range keys {
		switch k {
		case "mode":
			m, ok := plainString(vals[i])
			if !ok {
				return ToolRecoveryPolicy{}, false
			}
			out.Mode = ToolRecoveryMode(m)
		case "max_attempts":
			n, ok := plainUint16(vals[i])
			if !ok {
				return ToolRecoveryPolicy{}, false
			}
			out.MaxAttempts = n
		}
	}
	if out.check() != nil {
		return ToolRecoveryPolicy{}, false
	}
	return out, true
}

// RecoveryCapabilityFor is the effective capability a pinned policy is validated against
// (the original's execution-target decision table):
//
//   - unknown tool (known false) ⇒ non_recoverable;
//   - a delegation ⇒ durable_request, whatever the target;
//   - target brain ⇒ the tool's own capability (any wired sandbox executor is ignored);
//   - target sandbox ⇒ the wired sandbox executor's capability for the tool, or
//     non_recoverable when no sandbox executor is wired (sandboxCapability nil);
//   - any other target ⇒ non_recoverable.
//
// A capability that is not one of the four known values counts as non_recoverable.
// The function is pure: the inputs come from the trusted registry, never from the batch.
func RecoveryCapabilityFor(kind ToolKind, target ToolExecutionTarget, toolCapability ToolRecoveryCapability,
	sandboxCapability *ToolRecoveryCapability, known bool) ToolRecoveryCapability {
	switch {
	case !known:
		return CapabilityNonRecoverable
	case kind == KindDelegation:
		return CapabilityDurableRequest
	case target == TargetBrain:
		return toolCapability.orNonRecoverable()
	case target == TargetSandbox && sandboxCapability != nil:
		return sandboxCapability.orNonRecoverable()
	default:
		return CapabilityNonRecoverable
	}
}

// PinRecoveryPolicy is the policy copied into a call when its batch is created: an unknown tool gets [DefaultRecoveryPolicy], a delegation always gets
// [DurableRequestPolicy], any other tool its configured policy, or the default when the
// configured one is malformed. The pinned policy never changes afterwards.
func PinRecoveryPolicy(kind ToolKind, known bool, configured ToolRecoveryPolicy) ToolRecoveryPolicy {
	switch {
	case !known:
		return DefaultRecoveryPolicy()
	case kind == KindDelegation:
		return DurableRequestPolicy()
	case configured.check() != nil:
		return DefaultRecoveryPolicy()
	default:
		return configured
	}
}
