package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/schema"
)

func TestMain(m *testing.M) { testserver.VerifyTestMain(m) }

// latest is the version of the last migration of every dialect.
const latest = 2

// TestUpDownVersion migrates up, checks the table, migrates down and up
// again on both dialects, and leaves the caller's *sql.DB open.
func TestUpDownVersion(t *testing.T) {
	for _, c := range []struct {
		name, driver string
		d            schema.Dialect
		dsn          func(testing.TB) string
	}{
		{"postgres", "pgx", schema.Postgres, func(t testing.TB) string { return testserver.Postgres(t).DSN() }},
		{"mysql", "mysql", schema.MySQL, func(t testing.TB) string { return testserver.MySQL(t).DSN() }},
		{"sqlite", "sqlite", schema.SQLite, liteDSN},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, err := sql.Open(c.driver, c.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			version := func(want uint) {
				t.Helper()
				v, dirty, err := schema.Version(ctx, db, c.d)
				if err != nil || v != want || dirty {
					t.Fatalf("Version = %d, %v, %v; want %d, clean", v, dirty, err, want)
				}
			}
			count := func() (n int, err error) {
				err = db.QueryRowContext(ctx, "SELECT count(*) FROM simba_mutex").Scan(&n)
				return n, err
			}
			version(0)
			for range 2 { // the second Up is a no-op, not an error
				if err := schema.Migrate(ctx, db, c.d); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
				version(latest)
			}
			if n, err := count(); err != nil || n != 0 {
				t.Fatalf("simba_mutex after Migrate: %d rows, %v", n, err)
			}
			for range 2 {
				if err := schema.MigrateDown(ctx, db, c.d); err != nil {
					t.Fatalf("MigrateDown: %v", err)
				}
				version(0)
			}
			if _, err := count(); err == nil {
				t.Fatal("simba_mutex still exists after MigrateDown")
			}
			if err := schema.Migrate(ctx, db, c.d); err != nil {
				t.Fatalf("Migrate after down: %v", err)
			}
			version(latest)
			if err := db.PingContext(ctx); err != nil {
				t.Fatalf("the caller's *sql.DB is unusable after migrating: %v", err)
			}
			var apps int // the application's own golang-migrate table is untouched
			_ = db.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&apps)
			if apps != 0 {
				t.Errorf("schema_migrations has %d rows; simba's state belongs in %s", apps, schema.MigrationsTable)
			}
		})
	}
}

func TestBadArguments(t *testing.T) {
	ctx := context.Background()
	if err := schema.Migrate(ctx, nil, schema.Postgres); !errors.Is(err, schema.ErrNilDB) {
		t.Errorf("Migrate(nil db) = %v, want ErrNilDB", err)
	}
	db, err := sql.Open("pgx", "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := schema.Migrate(ctx, db, "oracle"); !errors.Is(err, schema.ErrUnknownDialect) {
		t.Errorf("Migrate(oracle) = %v, want ErrUnknownDialect", err)
	}
	for _, d := range []schema.Dialect{schema.Postgres, schema.MySQL, schema.SQLite} {
		f, err := schema.FS(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"000001_create_simba_mutex.up.sql", "000001_create_simba_mutex.down.sql",
			"000002_add_queue.up.sql", "000002_add_queue.down.sql"} {
			if _, err := fs.Stat(f, name); err != nil {
				t.Errorf("FS(%s): %v", d, err)
			}
		}
	}
}

// liteDSN is a new SQLite file with a busy timeout.
func liteDSN(t testing.TB) string {
	return "file:" + filepath.Join(t.TempDir(), "simba.db") + "?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)"
}

// TestSQLiteConcurrentMigrate: processes that start on a fresh file at
// once (as simba CLI invocations do) each migrate it; they take turns,
// none fails, and the file ends at the latest version.
func TestSQLiteConcurrentMigrate(t *testing.T) {
	dsn := liteDSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		db, err := sql.Open("sqlite", dsn) // one pool each, like separate processes
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = schema.Migrate(context.Background(), db, schema.SQLite)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, dirty, err := schema.Version(context.Background(), db, schema.SQLite); err != nil || v != latest || dirty {
		t.Errorf("Version = %d, %v, %v; want %d, clean", v, dirty, err, latest)
	}
}

// TestSQLiteMigrateWaitsForWALSwitch (issue 14, item 11): switching a file
// to WAL (the journal_mode pragma of the DSN, run as each connection
// opens) while another connection holds the write lock (as another
// migrator does, inside BEGIN IMMEDIATE) fails at once with SQLITE_BUSY,
// busy timeout or not: SQLite does not wait where waiting could deadlock.
// That was the one-in-30 failure of TestSQLiteConcurrentMigrate. Migrate
// must wait for the lock instead of failing.
func TestSQLiteMigrateWaitsForWALSwitch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "simba.db")
	// Rollback journal: not WAL yet. Its COMMIT needs the file to itself
	// and waits, up to its busy timeout, while the migrator reads (without
	// one, a CI run beside make test failed on it: 'database is locked (5)
	// (SQLITE_BUSY)' from the COMMIT).
	blocker, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	ctx := context.Background()
	conn, err := blocker.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done := make(chan error, 1)
	go func() { done <- schema.Migrate(ctx, db, schema.SQLite) }()
	select {
	case err := <-done:
		t.Fatalf("Migrate returned while another connection held the file: %v", err)
	case <-time.After(300 * time.Millisecond): // still waiting, as it should
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Migrate after the lock was released: %v", err)
	}
}
