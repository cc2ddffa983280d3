package schema_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/simba-go/simba/schema"
)

// Migrate creates the tables of the SQL stores in a database the
// application already opened, with the driver it already uses (pgx's
// "pgx", lib/pq's "postgres", go-sql-driver's "mysql", modernc's
// "sqlite"); run it at start-up, or apply the files of FS with the
// migration tool the application uses. A second run changes nothing.
// (Compiled, not run by go test: it needs a database.)
func ExampleMigrate() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	if err := schema.Migrate(ctx, db, schema.Postgres); err != nil {
		log.Fatal(err)
	}
	version, dirty, err := schema.Version(ctx, db, schema.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("simba schema at version %d (dirty: %v)", version, dirty)
}
