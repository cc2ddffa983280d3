//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUsage: help goes to stdout with exit 0; a bad command line is one
// line on stderr and exit 64.
func TestUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	for _, args := range [][]string{{"--help"}, {"help"}, {"help", "run"}, {"run", "--help"}, {"status", "-h"}} {
		r := e.run(args...)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Usage") {
			t.Errorf("simba %v: code %d, stdout %q, stderr %q; want usage on stdout, exit 0", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := e.run("help", "run"); !strings.Contains(r.stdout, "--no-wait") || !strings.Contains(r.stdout, "76") {
		t.Errorf("simba help run does not describe --no-wait and the exit codes:\n%s", r.stdout)
	}
	for _, args := range [][]string{
		{"frobnicate"},
		{"help", "frobnicate"},
		{"run"},
		{"run", "name"},
		{"run", "--bogus", "name", "--", "true"},
		{"run", "--wait", "1s", "--no-wait", "name", "--", "true"},
		{"run", "--ttl", "0", "name", "--", "true"},
		{"run", "--ttl", "ten", "name", "--", "true"},
		{"run", "", "--", "true"},
		{"elect", "name"},
		{"migrate"},
		{"migrate", "sideways"},
	} {
		oneErrorLine(t, e.run(args...), codeUsage)
	}
	// A CMD that cannot run is found before the lock is taken.
	oneErrorLine(t, e.run("elect", "job", "--", "no-such-command-simba-test"), codeNotFound)
	oneErrorLine(t, e.run("run", "job", "--", "/"), codeCannotExec)
}

// TestBadStores: a bad URL is exit 64, an unreachable store exit 69, each
// with exactly one line that never shows the password.
func TestBadStores(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	for _, tc := range []struct {
		url  string
		code int
	}{
		{"nonsense", codeUsage},
		{"ftp://host/x", codeUsage},
		{"postgres://u:s3cret@host:99999999/db", codeUsage},
		{"mysql://u:s3cret@host:3306", codeUsage},
		{"mysql://u:s3cret@host:3306/db?nosuchparam=%zz", codeUsage},
		{"redis://u:s3cret@host:6379/notanumber", codeUsage},
		{"redis://u:s3cret@h1:6379,h2:6379/3", codeUsage},
		{"zk://", codeUsage},
		{"zk://h:2181/not/../clean", codeUsage},
		{"sqlite://", codeUsage},
		{"postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=5", codeUnavailable},
		{"mysql://u:s3cret@127.0.0.1:1/db", codeUnavailable},
		{"redis://u:s3cret@127.0.0.1:1", codeUnavailable},
		{"redis://127.0.0.1:1,127.0.0.1:2", codeUnavailable},
		{"zk://127.0.0.1:1,127.0.0.1:2/simba", codeUnavailable},
		{"sqlite://" + e.path("no/such/dir/x.db"), codeUnavailable},
	} {
		for _, args := range [][]string{
			{"run", "--store", tc.url, "--no-wait", "job", "--", "true"},
			{"status", "--store", tc.url, "job"},
		} {
			start := time.Now()
			line := oneErrorLine(t, e.run(args...), tc.code)
			if strings.Contains(line, "s3cret") {
				t.Errorf("%s: the message shows the password: %s", tc.url, line)
			}
			if took := time.Since(start); took > connectTimeout*8/10 { // fails, rather than waits for the timeout
				t.Errorf("%s: took %v", tc.url, took)
			}
		}
	}
}

// TestCompletion: the built binary's bash completion script, sourced in
// bash, completes commands and each command's flags; zsh's is the same
// script behind bashcompinit; any other shell is a usage error.
func TestCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	r := e.run("completion", "bash")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("completion bash: exit %d, stderr %q", r.code, r.stderr)
	}
	sh, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("no bash to source the completion script in: %v", err)
	}
	script := filepath.Join(t.TempDir(), "simba.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = strconv.Quote(w)
		}
		prog := fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _simba; printf '%%s\n' "${COMPREPLY[@]}"`,
			script, strings.Join(q, " "), len(words)-1)
		out, err := exec.Command(sh, "--norc", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash completing %q: %v: %s", words, err, out)
		}
		return strings.Fields(string(out))
	}
	if got := complete("simba", "ru"); !slices.Equal(got, []string{"run"}) {
		t.Errorf("simba ru<TAB> completes to %q, want [run]", got)
	}
	if got := complete("simba", "run", "--no"); !slices.Equal(got, []string{"--no-wait"}) {
		t.Errorf("simba run --no<TAB> completes to %q, want [--no-wait]", got)
	}
	if got := complete("simba", "status", "--js"); !slices.Equal(got, []string{"--json"}) {
		t.Errorf("simba status --js<TAB> completes to %q, want [--json]", got)
	}
	if z := e.run("completion", "zsh"); z.code != 0 || !strings.HasPrefix(z.stdout, "autoload -U +X bashcompinit") || !strings.Contains(z.stdout, "complete -o default -F _simba simba") {
		t.Errorf("completion zsh: exit %d, stdout %q", z.code, z.stdout)
	}
	oneErrorLine(t, e.run("completion", "fish"), codeUsage)
}
