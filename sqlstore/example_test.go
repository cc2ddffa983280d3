package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// A payment job that must run on one machine at a time, with the pool the
// application already has. (Not run by go test: it needs a server.)
func ExampleNewPostgres() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@127.0.0.1:5432/app?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := schema.Migrate(ctx, db, schema.Postgres); err != nil { // creates simba_mutex once
		log.Fatal(err)
	}
	store, err := sqlstore.NewPostgres(db)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	m, err := lease.NewManager(store)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)

	l, err := m.Acquire(ctx, "payments/settle")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	// Pass l.Context() to the work, so it stops the moment the lease is
	// lost, and l.Token() to the resource, so a late write is refused.
	fmt.Println("settling with fencing token", l.Token())
}
