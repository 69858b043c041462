package config_test

import (
	"testing"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestDelegationCallsAlwaysPinDurableRequest: a delegation call pins durable_request
// whatever recovery policy its configuration names, so a crashed child
// start reconnects to the same child instead of being abandoned or re-created.
func TestDelegationCallsAlwaysPinDurableRequest(t *testing.T) {
	cfg, err := config.Parse([]byte(`
tools:
  - id: delegate
    kind: delegation
    recovery_policy: { mode: never_replay, max_attempts: 1 }
  - id: plain
    recovery_policy: { mode: never_replay, max_attempts: 1 }
`))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if got := cfg.Pin("delegate").Policy; got != contracts.DurableRequestPolicy() {
		t.Errorf("delegation pinned %+v, want %+v", got, contracts.DurableRequestPolicy())
	}
	if got := cfg.Pin("plain").Policy; got.Mode != contracts.ModeNeverReplay || got.MaxAttempts != 1 {
		t.Errorf("regular tool pinned %+v, want its configured never_replay/1", got)
	}
}

// TestSandboxCapabilityFollowsTheSandboxSwitch: a sandbox tool declares its capability,
// but only an enabled sandbox executor can honour it; disabled, the tool is
// non_recoverable. Brain tools keep what they declare either way.
func TestSandboxCapabilityFollowsTheSandboxSwitch(t *testing.T) {
	cfg, err := config.Parse([]byte(`
tools:
  - id: wc
    target: sandbox
    module: wc.wasm
    capability: replay_safe
  - id: echo
    capability: replay_safe
executors:
  sandbox:
    enabled: true
`))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if got := cfg.CurrentCapability(cfg.Pin("wc"), "wc"); got != contracts.CapabilityReplaySafe {
		t.Errorf("enabled sandbox: wc capability %s, want replay_safe", got)
	}
	cfg.Executors.Sandbox.Enabled = false
	if got := cfg.CurrentCapability(cfg.Pin("wc"), "wc"); got != contracts.CapabilityNonRecoverable {
		t.Errorf("disabled sandbox: wc capability %s, want non_recoverable", got)
	}
	if got := cfg.CurrentCapability(cfg.Pin("echo"), "echo"); got != contracts.CapabilityReplaySafe {
		t.Errorf("brain tool echo capability %s, want replay_safe", got)
	}
}
