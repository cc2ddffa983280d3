//go:build unix

package main

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes of simba itself. A command run by simba run passes its own exit
// status through instead (128+N when a signal N ended it).
const (
	codeOK          = 0
	codeUsage       = 64  // bad command line, unknown command, bad store URL
	codeUnavailable = 69  // store unreachable, not migrated, or failing
	codeSoftware    = 70  // an unexpected error inside simba
	codeBusy        = 75  // lock not acquired: held (--no-wait) or --wait ran out
	codeLost        = 76  // the lease was lost while CMD ran; CMD was terminated
	codeConfig      = 78  // the store grants less than the safety margin: ttl + transition exceed its limit
	codeCannotExec  = 126 // CMD was found but could not be started
	codeNotFound    = 127 // CMD was not found
	codeSignal      = 128 // + N: simba was interrupted by signal N before CMD ran
)

// exitError carries the exit code simba ends with and the one line it prints.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// fail returns an error that makes simba print "simba: " and the message,
// then exit with code.
func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// withCode gives err an exit code, keeping a code it already has.
func withCode(code int, err error) error {
	var e *exitError
	if err == nil || errors.As(err, &e) {
		return err
	}
	return &exitError{code: code, err: err}
}

// exitStatus ends simba with a code and prints nothing: CMD's own status.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// exitCode prints err, if it is one to print, as exactly one line and
// returns the code simba exits with.
func (c *cli) exitCode(err error) int {
	if err == nil {
		return codeOK
	}
	var s exitStatus
	if errors.As(err, &s) {
		return int(s)
	}
	code := codeSoftware
	var e *exitError
	if errors.As(err, &e) {
		code = e.code
	}
	c.printf("%s", err)
	return code
}

// oneLine folds a message onto one line: server errors can span several.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
