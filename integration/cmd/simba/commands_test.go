//go:build unix

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of this file run the built binary on the default store (a
// SQLite file in the test's home) or a sqlite:// URL: no server needed.

// startStdin is env.start with standard input read from a pipe; closing
// the returned file ends simba's input.
func (e *env) startStdin(args ...string) (*proc, *os.File) {
	e.t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = e.vars
	p.cmd.Dir = e.dir
	p.cmd.Stdin = r
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = time.Second
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	r.Close()
	go func() {
		_ = p.cmd.Wait()
		p.res = result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), took: time.Since(p.start)}
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	e.t.Cleanup(func() {
		w.Close()
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p, w
}

// firstLine waits for p's first line of standard output.
func firstLine(t *testing.T, p *proc) string {
	t.Helper()
	eventually(t, 20*time.Second, "simba prints a line: "+p.stderr.String(), func() bool {
		return strings.Contains(p.stdout.String(), "\n")
	})
	line, _, _ := strings.Cut(p.stdout.String(), "\n")
	return line
}

// TestFlagsAfterName (issue 21): flags may follow NAME; everything after
// -- belongs to CMD and is never parsed.
func TestFlagsAfterName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	holder, in := e.startStdin("lock", "job")
	firstLine(t, holder)

	// Before: CMD was "--no-wait -- true", exit 127.
	if line := oneErrorLine(t, e.run("run", "job", "--no-wait", "--", "true"), codeBusy); !strings.Contains(line, "held") {
		t.Errorf("run job --no-wait: %s", line)
	}
	oneErrorLine(t, e.run("run", "job", "--wait", "100ms", "--", "true"), codeBusy)
	oneErrorLine(t, e.run("run", "job", "--no-wait", "true"), codeBusy) // CMD right after NAME, no --
	in.Close()
	if r := holder.wait(t, 20*time.Second); r.code != 0 {
		t.Fatalf("lock: exit %d, stderr %q", r.code, r.stderr)
	}

	// --ttl after NAME takes effect: CMD sees it in simba status.
	e.vars = append(e.vars, "SIMBA_BIN="+bin)
	r := e.run("run", "x", "--ttl", "2s", "--transition", "1s", "--", "sh", "-c", `"$SIMBA_BIN" status x --json`)
	if r.code != 0 {
		t.Fatalf("run x --ttl 2s: exit %d, stderr %q", r.code, r.stderr)
	}
	var rows []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("status x --json after NAME: %v: %q", err, r.stdout)
	}
	if rows[0].Owner == "" || rows[0].TTLMs > 2000 || rows[0].TransitionMs > 3000 {
		t.Errorf("run x --ttl 2s --transition 1s: status %+v, want ttl <= 2s, transition <= 3s", rows[0])
	}

	// Nothing after -- is parsed, not even what looks like simba's flags.
	r = e.run("run", "y", "--", "sh", "-c", `echo "$@"`, "sh", "--ttl", "5s", "--no-wait", "--")
	if r.code != 0 || r.stdout != "--ttl 5s --no-wait --\n" {
		t.Errorf("run y -- sh ... --ttl 5s --no-wait --: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Nor is anything after CMD's first word without --.
	r = e.run("run", "y", "echo", "--ttl", "--json")
	if r.code != 0 || r.stdout != "--ttl --json\n" {
		t.Errorf("run y echo --ttl --json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A NAME only after -- is CMD's, so NAME is missing.
	oneErrorLine(t, e.run("run", "--", "job", "true"), codeUsage)

	// Before: exit 64.
	r = e.run("migrate", "version", "--json")
	var v struct {
		Version *uint `json:"version"`
		Dirty   bool  `json:"dirty"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v.Version == nil || *v.Version == 0 || v.Dirty {
		t.Errorf("migrate version --json: exit %d, stdout %q (%v), stderr %q", r.code, r.stdout, err, r.stderr)
	}
	if r := e.run("migrate", "--store", sqliteURL(e), "version"); r.code != 0 {
		t.Errorf("migrate --store URL version: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"status", "job", "--bogus"},
		{"migrate", "version", "--ttl", "1s"},
		{"lock", "a", "b"},
		{"lock", "a", "--wait", "1s", "--no-wait"},
		{"watch"},
		{"version", "extra"},
	} {
		oneErrorLine(t, e.run(args...), codeUsage)
	}
}

// TestVersion (issue 21): simba version and simba --version print the
// module version, the Go version and (when the build recorded it) the
// commit.
func TestVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := e.run(args...)
		if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "simba ") || !strings.Contains(r.stdout, runtime.Version()) {
			t.Errorf("simba %v: exit %d, stdout %q, stderr %q; want simba VERSION %s", args, r.code, r.stdout, r.stderr, runtime.Version())
		}
	}
	r := e.run("version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 || v.Version == "" || v.Go != runtime.Version() {
		t.Fatalf("version --json: exit %d, %q (%v)", r.code, r.stdout, err)
	}

	// It prints what the build recorded: go version -m reads the same
	// build information. A build stamped with VCS information (a git
	// checkout with -buildvcs=true; not a git worktree, where the go
	// command finds no repository) names the commit.
	stamped := filepath.Join(t.TempDir(), "simba")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", stamped, ".")
	build.Dir = filepath.Join("..", "..", "..", "cmd", "simba")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Logf("go build -buildvcs=true: %v: %s; checking the test's binary", err, out)
		stamped = bin
	}
	meta, err := exec.Command("go", "version", "-m", stamped).Output()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for _, l := range strings.Split(string(meta), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "build" {
			k, val, _ := strings.Cut(f[1], "=")
			recorded[k] = val
		}
	}
	out, err := exec.Command(stamped, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	v = versionInfo{}
	if err := json.Unmarshal(out, &v); err != nil || v.Commit != recorded["vcs.revision"] || v.CommitTime != recorded["vcs.time"] ||
		v.Modified != (recorded["vcs.modified"] == "true") {
		t.Errorf("version --json: %s (%v), but the build recorded %v", out, err, recorded)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && v.Commit != "" && v.Commit != strings.TrimSpace(string(head)) {
		t.Errorf("version names commit %s, HEAD is %s", v.Commit, head)
	}
	t.Logf("simba version --json: %s", out)
}

// TestLock (issue 21): simba lock prints the token and holds the lock
// until its standard input closes, or until SIGTERM; meanwhile nobody else
// gets it.
func TestLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	p, in := e.startStdin("lock", "job")
	token, err := strconv.ParseUint(firstLine(t, p), 10, 64)
	if err != nil || token == 0 {
		t.Fatalf("lock printed %q, want the token", p.stdout.String())
	}
	oneErrorLine(t, e.run("run", "--no-wait", "job", "--", "true"), codeBusy)
	oneErrorLine(t, e.run("lock", "--no-wait", "job"), codeBusy)
	var rows []lockStatus
	if r := e.run("status", "--json", "job"); json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) != 1 || rows[0].Token != token {
		t.Errorf("status while locked: %q, want token %d", r.stdout, token)
	}
	in.Close()
	if r := p.wait(t, 20*time.Second); r.code != 0 || r.stderr != "" {
		t.Fatalf("lock after stdin closed: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := e.run("run", "--no-wait", "job", "--", "true"); r.code != 0 {
		t.Fatalf("after the lock was released: run --no-wait exit %d, stderr %q", r.code, r.stderr)
	}

	// --json, released on SIGTERM; the next token is greater.
	p, _ = e.startStdin("lock", "job", "--json")
	var got struct {
		Lock, Owner string
		Token       uint64
	}
	if err := json.Unmarshal([]byte(firstLine(t, p)), &got); err != nil || got.Lock != "job" || got.Owner == "" || got.Token <= token {
		t.Fatalf("lock --json printed %q (%v), want {lock, owner, token > %d}", p.stdout.String(), err, token)
	}
	oneErrorLine(t, e.run("run", "--no-wait", "job", "--", "true"), codeBusy)
	p.signal(t, syscall.SIGTERM)
	if r := p.wait(t, 20*time.Second); r.code != 0 {
		t.Fatalf("lock after SIGTERM: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := e.run("run", "--no-wait", "job", "--", "true"); r.code != 0 {
		t.Fatalf("after SIGTERM released the lock: run --no-wait exit %d, stderr %q", r.code, r.stderr)
	}

	// Waiting for a held lock, it is interrupted like run: 128+N.
	holder, in := e.startStdin("lock", "job")
	firstLine(t, holder)
	waiter, _ := e.startStdin("lock", "job")
	time.Sleep(200 * time.Millisecond) // let it wait (either way it must end with 130)
	waiter.signal(t, syscall.SIGINT)
	oneErrorLine(t, waiter.wait(t, 20*time.Second), codeSignal+int(syscall.SIGINT))
	in.Close()
	holder.wait(t, 20*time.Second)
}

// TestWatch (issue 21): simba watch prints the owner, then one line per
// change, until SIGINT.
func TestWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	w := e.start("watch", "--json", "job")
	lines := func() []watchLine {
		var out []watchLine
		for _, l := range strings.Split(strings.TrimSpace(w.stdout.String()), "\n") {
			var x watchLine
			if l != "" && json.Unmarshal([]byte(l), &x) == nil {
				out = append(out, x)
			}
		}
		return out
	}
	eventually(t, 20*time.Second, "watch prints the free lock", func() bool { return len(lines()) == 1 })
	if l := lines()[0]; l.Lock != "job" || l.Owner != "" || l.Token != 0 || l.Time.IsZero() {
		t.Fatalf("first line %+v, want job free", l)
	}
	p, in := e.startStdin("lock", "job")
	token, _ := strconv.ParseUint(firstLine(t, p), 10, 64)
	eventually(t, 20*time.Second, "watch prints the holder", func() bool { return len(lines()) >= 2 })
	in.Close()
	p.wait(t, 20*time.Second)
	eventually(t, 20*time.Second, "watch prints the release", func() bool { return len(lines()) >= 3 })
	time.Sleep(300 * time.Millisecond) // a renewal or a re-read is not a change
	got := lines()
	if len(got) != 3 || got[1].Owner == "" || got[1].Token != token || got[2].Owner != "" || got[2].Token != 0 {
		t.Errorf("watch printed %q, want free, held with token %d, free", w.stdout.String(), token)
	}
	w.signal(t, syscall.SIGINT)
	if r := w.wait(t, 20*time.Second); r.code != 0 || r.stderr != "" {
		t.Errorf("watch after SIGINT: exit %d, stderr %q", r.code, r.stderr)
	}

	// The text form: one line per state.
	w = e.start("watch", "job")
	eventually(t, 20*time.Second, "watch prints a line", func() bool { return strings.Contains(w.stdout.String(), "\n") })
	w.signal(t, syscall.SIGTERM)
	if r := w.wait(t, 20*time.Second); r.code != 0 || !strings.HasSuffix(r.stdout, " job free\n") {
		t.Errorf("watch job: exit %d, stdout %q", r.code, r.stdout)
	}
}

// versionInfo is simba version --json (cmd/simba/version.go).
type versionInfo struct {
	Version    string `json:"version"`
	Go         string `json:"go"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
}

// watchLine is one line of simba watch --json (cmd/simba/watch.go).
type watchLine struct {
	Time time.Time `json:"time"`
	lockStatus
}
