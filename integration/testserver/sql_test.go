package testserver_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
)

// sqlKind runs the same checks for PostgreSQL and MySQL.
type sqlKind struct {
	driver      string
	dsnPrefix   string
	shared      func(testing.TB) *testserver.SQLServer
	private     func(testing.TB) *testserver.SQLServer
	existsQuery string // counts databases named $1/?
}

var sqlKinds = map[string]sqlKind{
	"postgres": {
		driver: "pgx", dsnPrefix: "postgres://postgres@127.0.0.1:",
		shared: testserver.Postgres, private: testserver.PrivatePostgres,
		existsQuery: "SELECT count(*) FROM pg_database WHERE datname = $1",
	},
	"mysql": {
		driver: "mysql", dsnPrefix: "root@tcp(127.0.0.1:",
		shared: testserver.MySQL, private: testserver.PrivateMySQL,
		existsQuery: "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?",
	},
}

func TestSQLShared(t *testing.T) {
	t.Parallel()
	for name, k := range sqlKinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var first *testserver.SQLServer
			t.Run("fresh database", func(t *testing.T) {
				first = k.shared(t)
				second := k.shared(t)
				if first.Database() == second.Database() || first.Addr() != second.Addr() {
					t.Fatalf("want one server, two databases: %s %s", first.DSN(), second.DSN())
				}
				if !strings.HasPrefix(first.DSN(), k.dsnPrefix) || !strings.Contains(first.DSN(), first.Database()) {
					t.Fatalf("DSN %q", first.DSN())
				}
				db := openDB(t, k.driver, first.DSN())
				ctx := ctxTimeout(t, 10*time.Second)
				if _, err := db.ExecContext(ctx, "CREATE TABLE t (v int)"); err != nil {
					t.Fatal(err)
				}
				if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (42)"); err != nil {
					t.Fatal(err)
				}
				var v int
				if err := db.QueryRowContext(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
					t.Fatalf("SELECT = %d, %v", v, err)
				}
				notControllable(t, first.Process)
			})
			if first == nil {
				return
			}
			// The test's database is dropped when the test ends.
			other := k.shared(t)
			db := openDB(t, k.driver, other.DSN())
			var n int
			if err := db.QueryRow(k.existsQuery, first.Database()).Scan(&n); err != nil || n != 0 {
				t.Fatalf("database %s left behind: count %d, %v", first.Database(), n, err)
			}
		})
	}
}

func TestSQLPrivateFaults(t *testing.T) {
	t.Parallel()
	for name, k := range sqlKinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := k.private(t)
			db := openDB(t, k.driver, srv.DSN())
			ctx := ctxTimeout(t, 60*time.Second)
			if _, err := db.ExecContext(ctx, "CREATE TABLE t (v int)"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			count := func() (int, error) {
				var n int
				err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n)
				return n, err
			}

			timed(t, name+" restart", srv.Restart)
			eventually(t, 60*time.Second, "data after restart", func() error { return wantRows(count, 1) })

			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			if err := queryOne(db, short); err == nil {
				t.Fatal("query answered by a paused server")
			}
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 60*time.Second, "query after resume", func() error { return queryOne(db, time.Second) })

			timed(t, name+" kill", srv.Kill)
			if err := queryOne(db, time.Second); err == nil {
				t.Fatal("query answered by a killed server")
			}
			timed(t, name+" start after kill (crash recovery)", srv.Start)
			eventually(t, 60*time.Second, "data after crash", func() error { return wantRows(count, 1) })
			timed(t, name+" stop", srv.Stop)
		})
	}
}

func wantRows(count func() (int, error), want int) error {
	n, err := count()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("rows: got %d, want %d", n, want)
	}
	return nil
}
