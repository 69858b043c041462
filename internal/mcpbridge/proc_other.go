//go:build !unix

package mcpbridge

import (
	"os"
	"os/exec"
)

// signal values for platforms without process groups: both end the child.
const (
	sigTerminate = 0
	sigKill      = 1
)

// configureProcess does nothing where process groups are not available.
func configureProcess(*exec.Cmd) {}

// signalGroup ends the child itself: without process groups there is no gentler signal to
// send, and its descendants cannot be reached.
func signalGroup(cmd *exec.Cmd, _ int) {
	if cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(os.Kill)
}
