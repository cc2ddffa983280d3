//go:build unix

package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
	_ "modernc.org/sqlite"
)

// TestStatusPages (issue 21): simba status without names lists every held
// lock through lease.Lister, a page of statusPage names at a time, as one
// JSON array or one table; on SQLite, no server needed.
func TestStatusPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	url := sqliteURL(e)
	// The file simba opens, with the parameters it uses (cmd/simba/sqlite.go).
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(url, "sqlite://")+
		"?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	if err := schema.Migrate(ctx, db, schema.SQLite); err != nil {
		t.Fatal(err)
	}
	s, err := sqlstore.NewSQLite(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 2*statusPage + 17 // three pages
	var want []string
	for i := range n {
		name := fmt.Sprintf("page/%04d", i)
		if _, err := s.Acquire(ctx, name, "holder", time.Hour, time.Second); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	free, _ := s.Acquire(ctx, "page/free", "holder", time.Hour, time.Second)
	if err := s.Release(ctx, "page/free", "holder", free.Token); err != nil {
		t.Fatal(err)
	}

	r := e.run("status", "--store", url, "--json")
	var rows []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &rows); r.code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v, stderr %q", r.code, err, r.stderr)
	}
	var got []string
	for _, row := range rows {
		if row.Owner != "holder" || row.Token == 0 || row.TTLMs <= 0 {
			t.Errorf("row %+v, want held by holder", row)
		}
		got = append(got, row.Lock)
	}
	if !slices.Equal(got, want) {
		t.Errorf("status listed %d locks (%.60q...), want the %d held ones", len(got), got, len(want))
	}

	r = e.run("status", "--store", url)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != n+1 || !strings.HasPrefix(lines[0], "LOCK") || !strings.HasPrefix(lines[n], want[n-1]+" ") {
		t.Errorf("status: exit %d, %d lines (want a header and %d), stderr %q", r.code, len(lines), n, r.stderr)
	}
	if r := e.run("status", "--store", sqliteURL(&env{dir: t.TempDir()}), "--json"); r.code != 0 || r.stdout != "[]\n" {
		t.Errorf("status --json of an empty store: exit %d, %q", r.code, r.stdout)
	}
}

// statusPage is how many names simba status reads at a time
// (cmd/simba/status.go).
const statusPage = 500
