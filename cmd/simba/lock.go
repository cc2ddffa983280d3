//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/simba-go/simba/lease"
)

// released are the signals on which simba lock releases and exits 0.
var released = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// cmdLock implements simba lock: acquire, print the token, hold until a
// signal or the end of standard input, release.
func (c *cli) cmdLock(f *flags) error {
	name, err := oneName(f)
	if err != nil {
		return err
	}
	if err := f.wf.check(f); err != nil {
		return err
	}
	s := &session{name: name, sigs: make(chan os.Signal, 8), ending: releaseTimeout}
	if err := c.openSession(f, s, released); err != nil {
		return err
	}
	defer s.Close()
	l, err := c.acquireFor(f.cmd, s.m, name, f.wf, s.sigs)
	if err != nil {
		return err
	}
	// A read of the terminal from the background (simba lock NAME & in an
	// interactive shell, or after Ctrl-Z and bg) fails instead of stopping
	// simba with SIGTTIN: a stopped simba would not renew the lease.
	signal.Ignore(syscall.SIGTTIN)
	// Watch standard input before saying that the lock is held: a caller
	// that closes it at once after reading the token is not missed.
	eof := make(chan struct{})
	go func() {
		if _, err := io.Copy(io.Discard, c.stdin); err == nil {
			close(eof)
		} // else (EIO: a terminal read from the background) hold until a signal
	}()
	if f.json {
		err = json.NewEncoder(c.stdout).Encode(struct {
			Lock  string `json:"lock"`
			Owner string `json:"owner"`
			Token uint64 `json:"token"`
		}{name, l.Owner().ID, l.Token()})
	} else {
		_, err = fmt.Fprintln(c.stdout, l.Token())
	}
	if err != nil { // nobody reads the token: give the lock back
		c.release(l)
		return withCode(codeSoftware, fmt.Errorf("lock: print the token: %v", err))
	}
	select {
	case <-s.sigs:
	case <-eof:
	case <-l.Done():
		return fail(codeLost, "lock: lease on %q (token %d) was lost", name, l.Token())
	}
	if err := c.release(l); errors.Is(err, lease.ErrLost) {
		return fail(codeLost, "lock: lease on %q (token %d) was lost before it was released", name, l.Token())
	}
	return nil
}
