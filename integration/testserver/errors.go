package testserver

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// ErrNotControllable is returned by the control methods of a [Process]
// (Start, Stop, Kill, Restart, Pause, Resume) when the server was not started
// by this package as a private local process: a server named by an
// environment variable, a container, or a server shared by the tests of the
// binary. Ask for a private server (PrivateRedis, PrivatePostgres, …) to get
// one that a test may stop and pause.
var ErrNotControllable = errors.New("testserver: server is not controllable")

// ErrNotRunning is returned by Pause and Resume when the process is stopped.
var ErrNotRunning = errors.New("testserver: server is not running")

// MissingError reports that a server cannot be had on this machine: no
// environment variable names one, no Docker engine answers, and its binary
// is not installed. Helpers skip the test on it (fail it when CI is set).
type MissingError struct {
	Server  string // "redis", "postgres", "mysql", "zookeeper"
	Package string // the Debian package that provides the binary
	Env     string // the environment variable that names an external server
	Detail  string // what was looked for
	Script  string // the script that installs it; .ci/install-servers when empty
}

// Error implements error.
func (e *MissingError) Error() string {
	env := ""
	if e.Env != "" {
		env = ", set " + e.Env
	}
	script := e.Script
	if script == "" {
		script = ".ci/install-servers"
	}
	return fmt.Sprintf("testserver: no %s server: %s; install the Debian package %s (or run %s%s, or start a Docker engine)",
		e.Server, e.Detail, e.Package, script, env)
}

// inCI reports whether the CI environment variable is set to a true value
// ("true", "1", …), in which case a missing server fails the test.
func inCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// need ends the test when err is not nil: a *MissingError skips it (fails it
// in CI), anything else fails it.
func need(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var missing *MissingError
	switch {
	case !errors.As(err, &missing):
		t.Fatal(err)
	case inCI():
		t.Fatalf("%v (CI is set, so a missing server is a failure)", err)
	default:
		t.Skip(err.Error())
	}
}
