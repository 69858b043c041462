//go:build unix

package mcpbridge

import (
	"os/exec"
	"syscall"
)

const (
	sigTerminate = syscall.SIGTERM
	sigKill      = syscall.SIGKILL
)

// configureProcess makes the child the leader of a new process group, so that shutting it
// down also reaches the processes it started.
func configureProcess(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the child's process group. Errors (typically: the group is
// already gone) are ignored: shutdown is best effort past the leader's exit.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
