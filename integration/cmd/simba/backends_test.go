//go:build unix

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBackends runs the commands once on every store: migrate where there
// is a schema, run with the lease's variables, status of the free lock.
func TestBackends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		url    func(*testing.T, *env) string
		schema bool // SQL: migrated explicitly, except SQLite
	}{
		{"sqlite", func(_ *testing.T, e *env) string { return sqliteURL(e) }, false},
		{"postgres", func(t *testing.T, _ *env) string { return postgresURL(t) }, true},
		{"mysql", func(t *testing.T, _ *env) string { return mysqlURL(t) }, true},
		{"redis", func(t *testing.T, _ *env) string { return redisURL(t) }, false},
		{"zookeeper", func(t *testing.T, _ *env) string { return zkURL(t) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "")
			store := tc.url(t, e)
			e.vars = append(e.vars, "SIMBA_STORE="+store)
			name := uniqueName(t, "job")
			if tc.schema {
				migrate(t, e, "version", "0")
				migrate(t, e, "up", latestSchema)
				migrate(t, e, "up", latestSchema)
				migrate(t, e, "version", latestSchema)
			} else if tc.name == "sqlite" {
				migrate(t, e, "version", "0") // created on first use, not by migrate version
			} else {
				r := e.run("migrate", "up")
				if r.code != 0 || !strings.Contains(r.stdout, "nothing to migrate") {
					t.Errorf("migrate up: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
				}
			}
			r := e.run("run", "--ttl", "1s", "--transition", "500ms", "--wait", "20s", name, "--", "sh", "-c", `echo "$SIMBA_LOCK $SIMBA_TOKEN"; exit 5`)
			f := strings.Fields(r.stdout)
			if r.code != 5 || len(f) != 2 || f[0] != name || f[1] == "0" || !onlyRetries(r.stderr) {
				t.Errorf("run: exit %d, stdout %q, stderr %q; want CMD's exit 5 and its lock and token", r.code, r.stdout, r.stderr)
			}
			r = e.run("status", "--json", name)
			var rows []lockStatus
			if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 || rows[0].Owner != "" {
				t.Errorf("status after run: %v %q %q; want the lock free", err, r.stdout, r.stderr)
			}
			switch {
			case tc.schema:
				migrate(t, e, "down", "0")
				oneErrorLine(t, e.run("run", name, "--", "true"), codeUnavailable)
			case tc.name == "sqlite":
				migrate(t, e, "version", latestSchema)
				migrate(t, e, "down", "0")
				if r := e.run("run", name, "--", "true"); r.code != 0 {
					t.Errorf("run after migrate down: exit %d, %s; want the schema created again", r.code, r.stderr)
				}
			}
			if !tc.schema && tc.name != "sqlite" {
				// Lists through lease.Lister, a page at a time.
				if r := e.run("status", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil {
					t.Errorf("status without names: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
				}
			}
		})
	}
}

// latestSchema is the version of the last migration of package schema.
const latestSchema = "2"

// migrate runs simba migrate op and checks the version it prints.
func migrate(t *testing.T, e *env, op, version string) {
	t.Helper()
	r := e.run("migrate", op)
	if r.code != 0 || strings.TrimSpace(r.stdout) != version {
		t.Errorf("migrate %s: exit %d, stdout %q, stderr %q; want version %s", op, r.code, r.stdout, r.stderr, version)
	}
}

// onlyRetries reports whether stderr holds nothing but warnings of failed
// attempts that simba retried: on a loaded machine an attempt may run
// out of its call timeout (seen at load 27 on ZooKeeper: "simba: warning:
// acquire failed event=acquire_failed ... context deadline exceeded")
// before a later one wins.
func onlyRetries(stderr string) bool {
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line != "" && !strings.HasPrefix(line, "simba: warning: acquire failed ") {
			return false
		}
	}
	return true
}
