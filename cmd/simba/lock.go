//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
	// Watch standard input before saying that the lock is held: a caller
	// that closes it at once after reading the token is not missed.
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c.stdin)
		close(eof)
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
