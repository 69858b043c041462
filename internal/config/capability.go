package config

import "github.com/awaken-dev/awaken/pkg/contracts"

// CurrentCapability is the recovery capability a call of toolID has under this
// configuration now, for a call pinned with pin: an unknown tool (or a
// pin that named none) is non_recoverable, a delegation a durable request, a brain tool
// what it declares, and a sandbox tool what it declares only while the sandbox executor
// is enabled — a disabled sandbox runs nothing, so nothing of it can be recovered.
//
// It is what a pinned recovery policy is checked against before every executor entry:
// by the gate before it dispatches a call, and by the executor before it replays one
// after a crash, so a capability that shrank since the batch was pinned is noticed.
func (c *Config) CurrentCapability(pin contracts.PinnedCall, toolID string) contracts.ToolRecoveryCapability {
	t, ok := c.Tool(toolID)
	var sandbox *contracts.ToolRecoveryCapability
	if ok && t.Target == contracts.TargetSandbox && c.Executors.Sandbox.Enabled {
		declared := t.Capability
		sandbox = &declared
	}
	return contracts.RecoveryCapabilityFor(pin.Kind, pin.Target, t.Capability, sandbox, ok && pin.Known)
}
