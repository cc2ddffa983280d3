package schema_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/database/postgres"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/schema"
)

// TestCompatibleWithGolangMigrate: package schema runs golang-migrate with
// drivers of its own (so that it links no database/sql driver). A database
// that golang-migrate's own PostgreSQL or MySQL driver migrated (as
// earlier versions of this package did) is picked up where it stands, and
// the two take the same lock.
func TestCompatibleWithGolangMigrate(t *testing.T) {
	for _, c := range []struct {
		name, driver string
		d            schema.Dialect
		dsn          func(testing.TB) string
		drv          func(context.Context, *sql.Conn) (database.Driver, error)
	}{
		{"postgres", "pgx", schema.Postgres, func(t testing.TB) string { return testserver.Postgres(t).DSN() },
			func(ctx context.Context, c *sql.Conn) (database.Driver, error) {
				return postgres.WithConnection(ctx, c, &postgres.Config{MigrationsTable: schema.MigrationsTable})
			}},
		{"mysql", "mysql", schema.MySQL, func(t testing.TB) string { return testserver.MySQL(t).DSN() },
			func(ctx context.Context, c *sql.Conn) (database.Driver, error) {
				return mysql.WithConnection(ctx, c, &mysql.Config{MigrationsTable: schema.MigrationsTable})
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, err := sql.Open(c.driver, c.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			drv, err := c.drv(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			f, err := schema.FS(c.d)
			if err != nil {
				t.Fatal(err)
			}
			src, err := iofs.New(f, ".")
			if err != nil {
				t.Fatal(err)
			}
			m, err := migrate.NewWithInstance("iofs", src, c.name, drv)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Steps(1); err != nil {
				t.Fatalf("golang-migrate's driver: %v", err)
			}
			m.Close()
			if v, dirty, err := schema.Version(ctx, db, c.d); err != nil || v != 1 || dirty {
				t.Fatalf("Version after golang-migrate's driver = %d, %v, %v; want 1", v, dirty, err)
			}
			if err := schema.Migrate(ctx, db, c.d); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			if v, dirty, err := schema.Version(ctx, db, c.d); err != nil || v != latest || dirty {
				t.Errorf("Version = %d, %v, %v; want %d", v, dirty, err, latest)
			}
		})
	}
}
