package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	modernc "modernc.org/sqlite"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// Benchmarks of the SQL stores on the test servers (make bench-sql):
//
//   - Op: one Store call; reports round trips per call (rt/op), counted
//     as the driver calls that wait for the server (statements and
//     prepares; a statement close is sent without waiting).
//   - Handoff: one Manager releases, another one waiting in another Store
//     acquires; reports the gap from the release's return to the grant
//     (p50, p99).

// BenchmarkOp measures each Store call and its round trips.
func BenchmarkOp(b *testing.B) {
	for _, d := range dialects {
		for _, dsnOpt := range []string{"", "interpolateParams=true"} {
			if dsnOpt != "" && d.name != "mysql" {
				continue
			}
			name := d.name
			if dsnOpt != "" {
				name += "+" + dsnOpt
			}
			b.Run(name, func(b *testing.B) {
				dsn := d.migrated(b)
				if dsnOpt != "" {
					dsn += "?" + dsnOpt
				}
				db, rt := countingDB(b, d, dsn)
				s, err := d.store(db, sqlstore.WithPush(false))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				const ttl, tr = 10 * time.Second, 6 * time.Second
				ops := []struct {
					name string
					f    func(i int) error
				}{
					{"acquire+release", func(int) error {
						r, err := s.Acquire(ctx, "bench/op", "a", ttl, tr)
						if err != nil {
							return err
						}
						return s.Release(ctx, "bench/op", "a", r.Token)
					}},
					{"acquire-lost", func(int) error {
						_, err := s.Acquire(ctx, "bench/held", "b", ttl, tr)
						return err
					}},
					{"renew", func(int) error {
						_, err := s.Renew(ctx, "bench/held", "a", 1, ttl, tr)
						return err
					}},
					{"get", func(int) error {
						_, err := s.Get(ctx, "bench/held")
						return err
					}},
				}
				if _, err := s.Acquire(ctx, "bench/held", "a", time.Hour, time.Hour); err != nil {
					b.Fatal(err)
				}
				for _, op := range ops {
					b.Run(op.name, func(b *testing.B) {
						rt.Store(0)
						for i := 0; b.Loop(); i++ {
							if err := op.f(i); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(float64(rt.Load())/float64(b.N), "rt/op")
					})
				}
			})
		}
	}
}

// BenchmarkHandoff measures release-to-grant between two Managers on
// separate Stores and pools, as between two processes, with push on.
func BenchmarkHandoff(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			dsn := d.migrated(b)
			ctx := context.Background()
			ms := [2]*lease.Manager{}
			for i := range ms {
				s := d.newStore(b, dsn)
				m, err := lease.NewManager(s, lease.WithTTL(10*time.Second), lease.WithTransition(6*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { m.Close(ctx) })
				ms[i] = m
			}
			held, err := ms[0].Acquire(ctx, "bench/handoff")
			if err != nil {
				b.Fatal(err)
			}
			gaps := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				next := ms[(i+1)%2]
				got := make(chan *lease.Lease, 1)
				go func() {
					l, err := next.Acquire(ctx, "bench/handoff")
					if err != nil {
						b.Error(err)
					}
					got <- l
				}()
				time.Sleep(20 * time.Millisecond) // the other one waits
				start := time.Now()
				if err := held.Release(ctx); err != nil {
					b.Fatal(err)
				}
				if held = <-got; held == nil {
					b.FailNow()
				}
				gaps = append(gaps, time.Since(start))
			}
			held.Release(ctx)
			sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
			b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// countingDB opens dsn through a connector that counts the driver calls
// that wait for the server.
func countingDB(b testing.TB, d dialect, dsn string) (*sql.DB, *atomic.Int64) {
	db, n, _ := countingPool(b, d, dsn, 8)
	db.SetMaxIdleConns(2) // database/sql's default
	return db, n
}

// countingPool is countingDB with a pool of size connections, all kept
// idle, that also counts the connections it opens.
func countingPool(b testing.TB, d dialect, dsn string, size int) (db *sql.DB, trips, conns *atomic.Int64) {
	var c driver.Connector
	switch d.schema {
	case schema.Postgres:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		c = stdlib.GetConnector(*cfg)
	case schema.SQLite:
		c = liteConnector{dsn}
	default:
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			b.Fatal(err)
		}
		if c, err = mysql.NewConnector(cfg); err != nil {
			b.Fatal(err)
		}
	}
	trips, conns = new(atomic.Int64), new(atomic.Int64)
	db = sql.OpenDB(counting{c, trips, conns})
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	b.Cleanup(func() { db.Close() })
	return db, trips, conns
}

// liteConnector opens dsn with modernc.org/sqlite.
type liteConnector struct{ dsn string }

func (c liteConnector) Connect(context.Context) (driver.Conn, error) { return c.Driver().Open(c.dsn) }
func (c liteConnector) Driver() driver.Driver                        { return &modernc.Driver{} }

type counting struct {
	driver.Connector
	n     *atomic.Int64
	conns *atomic.Int64 // connections opened
}

func (c counting) Connect(ctx context.Context) (driver.Conn, error) {
	c.conns.Add(1)
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{conn.(fullConn), c.n}, nil
}

// fullConn is what both drivers' connections implement.
type fullConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
}

type countingConn struct {
	fullConn
	n *atomic.Int64
}

func (c countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.n.Add(1)
	s, err := c.fullConn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return countingStmt{s.(fullStmt), c.n}, nil
}

func (c countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.fullConn.ExecContext(ctx, q, args)
	if err != driver.ErrSkip {
		c.n.Add(1)
	}
	return r, err
}

func (c countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.fullConn.QueryContext(ctx, q, args)
	if err != driver.ErrSkip {
		c.n.Add(1)
	}
	return r, err
}

type fullStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type countingStmt struct {
	fullStmt
	n *atomic.Int64
}

func (s countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.n.Add(1)
	return s.fullStmt.ExecContext(ctx, args)
}

func (s countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.n.Add(1)
	return s.fullStmt.QueryContext(ctx, args)
}
