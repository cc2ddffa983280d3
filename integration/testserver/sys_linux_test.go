//go:build linux

package testserver

import (
	"os/exec"
	"testing"
	"time"
)

// TestWaitExited: waitExited returns once the processes have exited, a
// zombie (exited, not yet reaped) included. A killed PostgreSQL's
// backends, re-parented when the postmaster died, could still be exiting
// when Kill returned, and the Start after it failed: "pre-existing shared
// memory block ... is still in use" (TestSQLPrivateFaults under load).
func TestWaitExited(t *testing.T) {
	cmd := exec.Command("sleep", "0.3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if !notExited(pid) {
		t.Fatal("a sleeping child reads as exited")
	}
	waitExited([]int{pid}, time.Minute)
	if notExited(pid) {
		t.Fatal("waitExited returned while the child still ran")
	}
	if !processAlive(pid) {
		t.Fatal("the child was reaped: the test meant a zombie")
	}
}
