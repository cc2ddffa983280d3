//go:build unix

package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// foregroundTTY returns the terminal on stdin when simba's process group
// is in the foreground of it: CMD's own process group must then take the
// foreground, or a CMD that reads the terminal is stopped (SIGTTIN), and
// Ctrl-C must reach CMD, once.
func foregroundTTY(stdin io.Reader) (fd int, ok bool) {
	f, isFile := stdin.(*os.File)
	if !isFile {
		return 0, false
	}
	fd = int(f.Fd())
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP) // fails when fd is no terminal
	return fd, err == nil && pgrp == syscall.Getpgrp()
}

// takeForeground gives the terminal fd back to simba's process group
// after CMD's group had it; simba, then in the background, ignores the
// SIGTTOU that this would otherwise stop it with.
func takeForeground(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, syscall.Getpgrp()) // the terminal may be gone
}
