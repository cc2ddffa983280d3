package payments_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/simba-go/simba/examples/testcontainers/payments"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// The images a user writes. simba-go's CI, which reaches no registry,
// points these variables at images it built (see .ci/images.env).
var (
	redisImage    = envOr("SIMBA_TEST_IMAGE_REDIS", "redis:7")
	postgresImage = envOr("SIMBA_TEST_IMAGE_POSTGRES", "postgres:15")
)

// Short lease timings keep the tests quick. They also bound how long a
// fresh Redis holds a lock's first grant back (redisstore's restart guard:
// ttl + transition + 1 s after the server starts).
var timings = []lease.Option{lease.WithTTL(2 * time.Second), lease.WithTransition(time.Second)}

// TestSettleOneAtATimeOnRedis runs three "processes" (each its own Redis
// client, Store and Manager) settling one invoice at once: the charges
// never overlap and the ledger has every settlement.
func TestSettleOneAtATimeOnRedis(t *testing.T) {
	ledger := newLedger(t, startPostgres(t))
	url := startRedis(t)
	settleConcurrently(t, ledger, func() lease.Store {
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		client := redis.NewClient(opts) // your application's client
		t.Cleanup(func() { client.Close() })
		store, err := redisstore.New(client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		return store
	})
}

// TestSettleOneAtATimeOnPostgres does the same with the leases in
// PostgreSQL: the schema migrated once, then a pool and Store per process.
func TestSettleOneAtATimeOnPostgres(t *testing.T) {
	dsn, db := migratedPostgres(t)
	settleConcurrently(t, newLedger(t, db), func() lease.Store {
		store, err := sqlstore.NewPostgres(open(t, dsn))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		return store
	})
}

// TestStaleHolderIsFenced shows the fencing token at work: a holder whose
// lease ended writes after the next holder did, and the ledger refuses it.
func TestStaleHolderIsFenced(t *testing.T) {
	_, db := migratedPostgres(t)
	ledger := newLedger(t, db)
	store, err := sqlstore.NewPostgres(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	alpha, beta := newManager(t, store), newManager(t, store)

	ctx := t.Context()
	old, err := alpha.Acquire(ctx, "invoices/inv-7")
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Release(ctx); err != nil { // think of a pause past the ttl
		t.Fatal(err)
	}
	next, err := beta.Acquire(ctx, "invoices/inv-7")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if err := ledger.Record(ctx, "inv-7", 100, next.Token()); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Record(ctx, "inv-7", 100, old.Token()); !errors.Is(err, payments.ErrFenced) {
		t.Fatalf("late write with token %d after %d: got %v, want ErrFenced", old.Token(), next.Token(), err)
	}
	if paid, err := ledger.Paid(ctx, "inv-7"); err != nil || paid != 100 {
		t.Fatalf("paid %d, %v; want 100", paid, err)
	}
}

// settleConcurrently runs three "processes", each a Settler with its own
// Manager on a Store of its own (newStore), that settle invoice inv-1 five
// times each, all at once, and checks that no two charges overlapped and
// that every settlement was recorded.
func settleConcurrently(t *testing.T, ledger *payments.Ledger, newStore func() lease.Store) {
	var settlers []*payments.Settler
	for range 3 {
		settlers = append(settlers, payments.NewSettler(newManager(t, newStore()), ledger))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const each, amount = 5, 100
	var inFlight, overlaps atomic.Int32
	charge := func(context.Context) error {
		if inFlight.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(10 * time.Millisecond) // the payment provider
		inFlight.Add(-1)
		return nil
	}
	var wg sync.WaitGroup
	for _, s := range settlers {
		for range each {
			wg.Go(func() {
				if err := s.Settle(ctx, "inv-1", amount, charge); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d charges overlapped another", n)
	}
	want := int64(len(settlers) * each * amount)
	if paid, err := ledger.Paid(ctx, "inv-1"); err != nil || paid != want {
		t.Errorf("paid %d, %v; want %d", paid, err, want)
	}
}

// startRedis starts a Redis container for the test and returns its URL.
func startRedis(t *testing.T) string {
	t.Helper()
	requireDocker(t)
	c, err := tcredis.Run(t.Context(), redisImage)
	testcontainers.CleanupContainer(t, c) // removed when the test ends
	if err != nil {
		t.Fatal(err)
	}
	url, err := c.ConnectionString(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// startPostgresDSN starts a PostgreSQL container for the test and returns
// the DSN of its database.
func startPostgresDSN(t *testing.T) string {
	t.Helper()
	requireDocker(t)
	c, err := tcpostgres.Run(t.Context(), postgresImage,
		tcpostgres.WithDatabase("app"), tcpostgres.WithUsername("app"), tcpostgres.WithPassword("secret"),
		tcpostgres.BasicWaitStrategies())
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	dsn, err := c.ConnectionString(t.Context(), "sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

func startPostgres(t *testing.T) *sql.DB { return open(t, startPostgresDSN(t)) }

// migratedPostgres starts a PostgreSQL container and runs simba-go's
// migrations (package schema) in its database.
func migratedPostgres(t *testing.T) (dsn string, db *sql.DB) {
	t.Helper()
	dsn = startPostgresDSN(t)
	db = open(t, dsn)
	if err := schema.Migrate(t.Context(), db, schema.Postgres); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

// open opens dsn with pgx, closed when the test ends.
func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newLedger(t *testing.T, db *sql.DB) *payments.Ledger {
	t.Helper()
	ledger, err := payments.NewLedger(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	return ledger
}

// newManager returns a Manager on store, closed when the test ends.
func newManager(t *testing.T, store lease.Store) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(store, timings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// requireDocker skips the test without a Docker engine, except in CI,
// where the container's start then fails it.
func requireDocker(t *testing.T) {
	t.Helper()
	if os.Getenv("CI") != "true" {
		testcontainers.SkipIfProviderIsNotHealthy(t)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
