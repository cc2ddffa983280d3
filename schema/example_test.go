package schema_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, "sqlite"

	"github.com/simba-go/simba/schema"
)

// Migrate creates the tables of the SQL stores in a database the
// application already opened; run it at start-up, or apply the files of FS
// with the migration tool the application uses. Here on SQLite, the
// embedded default; PostgreSQL and MySQL work the same way with
// schema.Postgres and schema.MySQL.
func ExampleMigrate() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "simba-schema-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	if err := schema.Migrate(ctx, db, schema.SQLite); err != nil {
		log.Fatal(err)
	}
	if err := schema.Migrate(ctx, db, schema.SQLite); err != nil { // a second run changes nothing
		log.Fatal(err)
	}
	version, dirty, err := schema.Version(ctx, db, schema.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("migrated:", version > 0, "dirty:", dirty)
	// Output:
	// migrated: true dirty: false
}
