package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRunInTerminal: run from an interactive terminal, CMD can read it
// (its process group takes the foreground; it is not stopped by SIGTTIN),
// and simba has the terminal back when CMD exits.
func TestRunInTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ptm, pts := openPTY(t)
	cmd := exec.Command(bin, "run", "--store", sqliteURL(e), "job", "--", "sh", "-c", `read x; echo "got $x"`)
	cmd.Env = e.vars
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	// simba leads a session whose controlling terminal is the pty, as a
	// shell's foreground job does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if _, err := ptm.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	output := make(chan string, 1)
	go func() { // until EIO: every holder of the terminal's other end has closed it
		var out strings.Builder
		buf := make([]byte, 256)
		for {
			n, err := ptm.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				output <- out.String()
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("simba run on a terminal: %v", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("simba run on a terminal: CMD did not read the terminal within 10s (stopped by SIGTTIN?)")
	}
	select {
	case out := <-output:
		if !strings.Contains(out, "got hello") {
			t.Errorf("terminal shows %q; want CMD to have read the line", out)
		}
	case <-time.After(5 * time.Second):
		t.Error("the terminal stays open after simba exited")
	}
}

// openPTY opens a pseudo-terminal pair; the test closes both.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptm, pts
}
