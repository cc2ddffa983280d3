//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/integration/testserver"
)

// bin is the simba binary the tests run, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "simba-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "simba")
	// The binary of this repository's cmd/simba, built in the library's
	// module (as go install builds it for a user), not this one's.
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "..", "cmd", "simba")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build simba:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(cleanupAfter{m, dir},
		goleak.IgnoreAnyFunction("github.com/testcontainers/testcontainers-go.(*Reaper).connect.func1"))
}

// cleanupAfter runs the tests, then stops the shared test servers and removes
// the binary (testserver.VerifyTestMain, plus the binary).
type cleanupAfter struct {
	m   *testing.M
	dir string
}

func (c cleanupAfter) Run() int {
	code := c.m.Run()
	if err := testserver.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.RemoveAll(c.dir)
	return code
}

// env is the environment of one test's simba processes: a home of its own
// (so the default SQLite file is the test's) and no SIMBA_STORE unless set.
type env struct {
	t    *testing.T
	vars []string
	dir  string
}

func newEnv(t *testing.T, store string) *env {
	t.Helper()
	dir := t.TempDir()
	var vars []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_STATE_HOME", "SIMBA_STORE", "SIMBA_LOCK", "SIMBA_OWNER", "SIMBA_TOKEN":
			continue
		}
		vars = append(vars, kv)
	}
	vars = append(vars, "HOME="+dir)
	if store != "" {
		vars = append(vars, "SIMBA_STORE="+store)
	}
	return &env{t: t, vars: vars, dir: dir}
}

// path returns a file name in the test's directory.
func (e *env) path(name string) string { return filepath.Join(e.dir, name) }

// result is a finished simba process.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// proc is a simba process started in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	start          time.Time
	res            result
}

// syncBuffer is a bytes.Buffer that the test may read while simba writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start starts simba args in the background; the test kills it if it
// still runs at the end.
func (e *env) start(args ...string) *proc {
	e.t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = e.vars
	p.cmd.Dir = e.dir
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = time.Second // a CMD left behind may hold the pipes
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.res = result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), took: time.Since(p.start)}
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for p to exit, at most d.
func (p *proc) wait(t *testing.T, d time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(d):
		t.Fatalf("simba %v still runs after %v; stderr so far: %s", p.cmd.Args[1:], d, p.stderr.String())
		return result{}
	}
}

// signal sends sig to the simba process itself.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// run runs simba args to the end (at most 30 s).
func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.start(args...).wait(e.t, 30*time.Second)
}

// eventually polls cond every 10 ms until it holds, at most d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("not within %v: %s", d, what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fileHas reports whether the file at path contains s.
func fileHas(path, s string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), s)
}

// oneErrorLine checks that r failed with code and printed exactly one line,
// "simba: ...", on stderr and nothing on stdout, and returns the line.
func oneErrorLine(t *testing.T, r result, code int) string {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d; stderr: %q", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	if n := strings.Count(r.stderr, "\n"); n != 1 || !strings.HasPrefix(r.stderr, "simba: ") {
		t.Errorf("stderr %q: want exactly one line starting with \"simba: \"", r.stderr)
	}
	return strings.TrimSpace(r.stderr)
}

// finalErrorLine is oneErrorLine for outcomes that may follow warnings of
// the lease package ("simba: warning: ..." lines, such as a failed renewal).
func finalErrorLine(t *testing.T, r result, code int) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "simba: warning: ") {
			t.Errorf("stderr line %q: want only warnings before the final line", l)
		}
	}
	last := lines[len(lines)-1]
	return oneErrorLine(t, result{code: r.code, stdout: r.stdout, stderr: last + "\n"}, code)
}
