package execcore

import (
	"fmt"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ReasonCapabilityPrefix starts the Indeterminate reason of a call found entered after a
// crash whose pinned recovery policy the tool's current capability no longer supports.
const ReasonCapabilityPrefix = "recovery policy no longer supported by the tool: "

// replayCheck validates, before a replay after a crash, the call's pinned recovery policy
// against the tool's capability under the executor's current configuration (a Requested
// or Executing call is revalidated before it is executed again, as in the original). The
// batch was pinned against the configuration of its submission; a tool whose capability
// shrank since (a new release, a disabled sandbox) must not be replayed on the strength of
// the old pin. A non-nil error is the Indeterminate reason.
func (x *Executor) replayCheck(req contracts.ExecRequest, toolID string, policy contracts.ToolRecoveryPolicy) error {
	if x.env.Config == nil {
		return nil
	}
	t, known := x.env.Config.Tool(toolID)
	pin := contracts.PinnedCall{Known: known, Target: req.Target, Kind: t.Kind}
	if err := policy.Validate(x.env.Config.CurrentCapability(pin, toolID)); err != nil {
		return fmt.Errorf("%s%w", ReasonCapabilityPrefix, err)
	}
	return nil
}
