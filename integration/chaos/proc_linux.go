package chaos

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd when the campaign's process dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
