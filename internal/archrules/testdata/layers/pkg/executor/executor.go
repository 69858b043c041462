// Package executor sits on the machinery (internal/runner is allowed) but imports a
// service and the wiring, and links wazero through internal/runner.
package executor

import (
	_ "github.com/awaken-dev/awaken/internal/runner"
	_ "github.com/awaken-dev/awaken/internal/wiring/cli"
	_ "github.com/awaken-dev/awaken/pkg/executor/tool"
	_ "github.com/awaken-dev/awaken/services/beta"
)
