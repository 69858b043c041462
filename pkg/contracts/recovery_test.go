package contracts

import (
	"encoding/json"
	"errors"
	"testing"
)

var (
	allModes        = []ToolRecoveryMode{ModeNeverReplay, ModeReplaySafe, ModeIdempotent, ModeDurableRequest}
	allCapabilities = []ToolRecoveryCapability{CapabilityNonRecoverable, CapabilityReplaySafe, CapabilityIdempotent, CapabilityDurableRequest}
)

// TestRecoveryModeCapabilityMatrix pins every (mode, capability) pair: configuration can
// only match or reduce capability, and there is no ordering between modes.
func TestRecoveryModeCapabilityMatrix(t *testing.T) {
	supported := map[ToolRecoveryMode]map[ToolRecoveryCapability]bool{
		ModeNeverReplay:    {CapabilityNonRecoverable: true, CapabilityReplaySafe: true, CapabilityIdempotent: true, CapabilityDurableRequest: true, "": true, "bogus": true},
		ModeReplaySafe:     {CapabilityReplaySafe: true},
		ModeIdempotent:     {CapabilityIdempotent: true},
		ModeDurableRequest: {CapabilityDurableRequest: true},
	}
	caps := append(append([]ToolRecoveryCapability{}, allCapabilities...), "", "bogus")
	for _, mode := range allModes {
		for _, capability := range caps {
			name := string(mode) + "/" + string(capability)
			if capability == "" {
				name += "empty"
			}
			t.Run(name, func(t *testing.T) {
				p, err := NewRecoveryPolicy(mode, 3)
				if err != nil {
					t.Fatal(err)
				}
				err = p.Validate(capability)
				want := supported[mode][capability]
				if want {
					if err != nil {
						t.Fatalf("Validate(%s) = %v, want supported", capability, err)
					}
					return
				}
				var ue *UnsupportedRecoveryError
				if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupportedRecovery) {
					t.Fatalf("Validate(%s) = %v, want *UnsupportedRecoveryError", capability, err)
				}
				if ue.Mode != mode || ue.Capability != capability {
					t.Fatalf("error names %s/%s, want %s/%s", ue.Mode, ue.Capability, mode, capability)
				}
			})
		}
	}
}

func TestZeroAttemptsFailClosed(t *testing.T) {
	for _, mode := range allModes {
		if _, err := NewRecoveryPolicy(mode, 0); !errors.Is(err, ErrZeroAttempts) {
			t.Fatalf("NewRecoveryPolicy(%s, 0) = %v, want ErrZeroAttempts", mode, err)
		}
	}
	var zero ToolRecoveryPolicy
	if err := zero.Validate(CapabilityReplaySafe); err == nil {
		t.Fatal("the zero policy validated")
	}
	p := ToolRecoveryPolicy{Mode: ModeNeverReplay}
	if err := p.Validate(CapabilityNonRecoverable); !errors.Is(err, ErrZeroAttempts) {
		t.Fatalf("Validate of max_attempts 0 = %v, want ErrZeroAttempts", err)
	}
	var decoded ToolRecoveryPolicy
	if err := json.Unmarshal([]byte(`{"mode":"never_replay","max_attempts":0}`), &decoded); !errors.Is(err, ErrZeroAttempts) {
		t.Fatalf("decode of max_attempts 0 = %v, want ErrZeroAttempts", err)
	}
	if _, err := NewRecoveryPolicy("sometimes", 3); !errors.Is(err, ErrInvalidRecoveryMode) {
		t.Fatalf("unknown mode = %v, want ErrInvalidRecoveryMode", err)
	}
}

func TestDefaultRecoveryPolicy(t *testing.T) {
	p := DefaultRecoveryPolicy()
	if p.Mode != ModeNeverReplay || p.MaxAttempts != 3 {
		t.Fatalf("default = %+v", p)
	}
	for _, c := range allCapabilities {
		if err := p.Validate(c); err != nil {
			t.Fatalf("default policy unsupported by %s: %v", c, err)
		}
	}
}

func TestRecoveryPolicyJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ToolRecoveryPolicy
		err  error // nil: success; errAny: some error
	}{
		{"full", `{"mode":"replay_safe","max_attempts":5}`, ToolRecoveryPolicy{ModeReplaySafe, 5}, nil},
		{"empty object defaults", `{}`, DefaultRecoveryPolicy(), nil},
		{"null defaults", `null`, DefaultRecoveryPolicy(), nil},
		{"missing attempts default", `{"mode":"idempotent"}`, ToolRecoveryPolicy{ModeIdempotent, 3}, nil},
		{"missing mode defaults", `{"max_attempts":1}`, ToolRecoveryPolicy{ModeNeverReplay, 1}, nil},
		{"max uint16", `{"max_attempts":65535}`, ToolRecoveryPolicy{ModeNeverReplay, 65535}, nil},
		{"zero attempts", `{"max_attempts":0}`, ToolRecoveryPolicy{}, ErrZeroAttempts},
		{"unknown mode", `{"mode":"always"}`, ToolRecoveryPolicy{}, ErrInvalidRecoveryMode},
		{"negative attempts", `{"max_attempts":-1}`, ToolRecoveryPolicy{}, errAny},
		{"too many attempts", `{"max_attempts":65536}`, ToolRecoveryPolicy{}, errAny},
		{"unknown field", `{"mode":"never_replay","retries":2}`, ToolRecoveryPolicy{}, errAny},
		{"not an object", `"never_replay"`, ToolRecoveryPolicy{}, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToolRecoveryPolicy{Mode: "sentinel", MaxAttempts: 99}
			err := json.Unmarshal([]byte(tt.in), &got)
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.err == nil && got != tt.want:
				t.Fatalf("got %+v, want %+v", got, tt.want)
			case tt.err == errAny && err == nil, tt.err != nil && tt.err != errAny && !errors.Is(err, tt.err):
				t.Fatalf("error %v, want %v", err, tt.err)
			case tt.err != nil && got != (ToolRecoveryPolicy{Mode: "sentinel", MaxAttempts: 99}):
				t.Fatalf("a failed decode modified the target: %+v", got)
			}
		})
	}
	data, err := json.Marshal(ToolRecoveryPolicy{ModeDurableRequest, 7})
	if err != nil || string(data) != `{"mode":"durable_request","max_attempts":7}` {
		t.Fatalf("marshal = %s, %v", data, err)
	}
}

var errAny = errors.New("any error")

func TestParseRecoveryCapability(t *testing.T) {
	tests := []struct {
		in   string
		want ToolRecoveryCapability
		ok   bool
	}{
		{"", CapabilityNonRecoverable, true},
		{"non_recoverable", CapabilityNonRecoverable, true},
		{"replay_safe", CapabilityReplaySafe, true},
		{"idempotent", CapabilityIdempotent, true},
		{"durable_request", CapabilityDurableRequest, true},
		{"Replay_Safe", "", false},
		{"never_replay", "", false},
	}
	for _, tt := range tests {
		t.Run("in="+tt.in, func(t *testing.T) {
			got, err := ParseRecoveryCapability(tt.in)
			checkRefusal(t, "ParseRecoveryCapability", err, tt.ok, ErrInvalidCapability)
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if tt.ok && !got.Valid() {
				t.Fatalf("%q parsed but is not Valid", got)
			}
		})
	}
	if ToolRecoveryCapability("").Valid() {
		t.Fatal("the zero capability must not be Valid")
	}
}

func TestParseRecoveryMode(t *testing.T) {
	for _, m := range allModes {
		if got, err := ParseRecoveryMode(string(m)); err != nil || got != m {
			t.Fatalf("ParseRecoveryMode(%s) = %q, %v", m, got, err)
		}
	}
	if got, err := ParseRecoveryMode(""); err != nil || got != ModeNeverReplay {
		t.Fatalf("empty mode = %q, %v", got, err)
	}
	if _, err := ParseRecoveryMode("non_recoverable"); !errors.Is(err, ErrInvalidRecoveryMode) {
		t.Fatalf("capability name accepted as mode: %v", err)
	}
}

// TestRecoveryCapabilityDecisionTable ports dispatch.rs
// recovery_capability_follows_the_execution_target_decision_table.
func TestRecoveryCapabilityDecisionTable(t *testing.T) {
	replay, idem := CapabilityReplaySafe, CapabilityIdempotent
	tests := []struct {
		name    string
		kind    ToolKind
		target  ToolExecutionTarget
		tool    ToolRecoveryCapability
		sandbox *ToolRecoveryCapability
		known   bool
		want    ToolRecoveryCapability
	}{
		{"unknown tool is non-recoverable", KindRegular, TargetBrain, CapabilityReplaySafe, &replay, false, CapabilityNonRecoverable},
		{"unknown delegation is non-recoverable", KindDelegation, TargetBrain, CapabilityReplaySafe, nil, false, CapabilityNonRecoverable},
		{"delegation is a durable request", KindDelegation, TargetBrain, CapabilityNonRecoverable, nil, true, CapabilityDurableRequest},
		{"delegation on sandbox is a durable request", KindDelegation, TargetSandbox, CapabilityNonRecoverable, nil, true, CapabilityDurableRequest},
		{"brain uses the tool's own", KindRegular, TargetBrain, CapabilityReplaySafe, nil, true, CapabilityReplaySafe},
		{"brain ignores the sandbox executor", KindRegular, TargetBrain, CapabilityReplaySafe, &idem, true, CapabilityReplaySafe},
		{"brain with undeclared capability", KindRegular, TargetBrain, "", nil, true, CapabilityNonRecoverable},
		{"sandbox uses the executor's", KindRegular, TargetSandbox, CapabilityReplaySafe, &idem, true, CapabilityIdempotent},
		{"sandbox without executor", KindRegular, TargetSandbox, CapabilityReplaySafe, nil, true, CapabilityNonRecoverable},
		{"client executed on brain", KindClientExecuted, TargetBrain, CapabilityIdempotent, nil, true, CapabilityIdempotent},
		{"unknown target fails closed", KindRegular, "gpu", CapabilityReplaySafe, &replay, true, CapabilityNonRecoverable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RecoveryCapabilityFor(tt.kind, tt.target, tt.tool, tt.sandbox, tt.known)
			if got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPinRecoveryPolicy(t *testing.T) {
	replay := ToolRecoveryPolicy{ModeReplaySafe, 5}
	tests := []struct {
		name       string
		kind       ToolKind
		known      bool
		configured ToolRecoveryPolicy
		want       ToolRecoveryPolicy
	}{
		{"unknown tool gets the default", KindRegular, false, replay, DefaultRecoveryPolicy()},
		{"delegation gets durable request", KindDelegation, true, replay, DurableRequestPolicy()},
		{"regular keeps its configuration", KindRegular, true, replay, replay},
		{"malformed configuration gets the default", KindRegular, true, ToolRecoveryPolicy{}, DefaultRecoveryPolicy()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PinRecoveryPolicy(tt.kind, tt.known, tt.configured); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
