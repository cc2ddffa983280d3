package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/integration/testserver"
)

// mysqlLockLeak ignores the goroutine go-mysql-lock v0.0.5 leaks on every
// Release: its refresher pings the closed connection, fails and calls
// Release, which blocks forever on a channel nobody reads (go-mysql-lock
// #5, fixed upstream after v0.0.5).
var mysqlLockLeak = goleak.IgnoreAnyFunction("github.com/sanketplus/go-mysql-lock.Lock.refresher")

// testKey is a key with bytes no store takes as they are.
const testKey = "orders/42: ./.. {x} é\x00"

// checkTarget runs two clients of tg against each other: a Lock that times
// out while the other holds, a Lock that waits until the other unlocks
// (within handoff), a lock abandoned by Close that becomes free (within
// handoff), Ops growing, and no goroutine left.
func checkTarget(t *testing.T, tg Target, handoff time.Duration, leaks ...goleak.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	baseline := goleak.IgnoreCurrent()
	var ops0 int64
	if tg.Ops != nil {
		var err error
		if ops0, err = tg.Ops(ctx); err != nil {
			t.Fatalf("Ops: %v", err)
		}
	}
	c1, err := tg.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	c2, err := tg.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}

	l1, err := c1.Lock(ctx, testKey)
	if err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	if l, err := c2.Lock(short, testKey); err == nil {
		t.Errorf("second Lock with a 300 ms deadline got the held lock")
		_ = l.Unlock(ctx)
	}
	cancelShort()

	type result struct {
		l   Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c2.Lock(ctx, testKey)
		got <- result{l, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("second Lock returned while the first held: %v", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	unlocked := time.Now()
	if err := l1.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(handoff):
		t.Fatalf("second Lock still waits %v after Unlock", handoff)
	}
	if r.err != nil {
		t.Fatalf("second Lock: %v", r.err)
	}
	t.Logf("hand-off after Unlock: %v", time.Since(unlocked).Round(time.Millisecond))
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock: %v", err)
	}

	// A lock abandoned by Close is free again, at once or after its lease.
	if _, err := c1.Lock(ctx, testKey+"2"); err != nil {
		t.Fatalf("Lock before Close: %v", err)
	}
	if err := c1.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wait, cancelWait := context.WithTimeout(ctx, handoff)
	l, err := c2.Lock(wait, testKey+"2")
	cancelWait()
	if err != nil {
		t.Fatalf("Lock of a key abandoned by Close, within %v: %v", handoff, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := c2.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	if tg.Ops != nil {
		ops1, err := tg.Ops(ctx)
		if err != nil {
			t.Fatalf("Ops: %v", err)
		}
		t.Logf("ops: %d", ops1-ops0)
		if ops1 <= ops0 {
			t.Errorf("Ops went from %d to %d", ops0, ops1)
		}
	}
	goleak.VerifyNone(t, append(leaks, baseline)...)
}

// checkOpsOwn checks that Ops does not count its own statements: two calls
// with nothing in between return the same count.
func checkOpsOwn(t *testing.T, ops func(context.Context) (int64, error)) {
	t.Helper()
	var n [3]int64
	for i := range n {
		var err error
		if n[i], err = ops(t.Context()); err != nil {
			t.Fatalf("Ops: %v", err)
		}
	}
	if n[0] != n[1] || n[1] != n[2] {
		t.Errorf("Ops counts itself: %v", n)
	}
}

// sqlTarget returns the target lib/backend of sqlTargets(s).
func sqlTarget(t *testing.T, s Servers, id string) Target {
	t.Helper()
	for _, tg := range sqlTargets(s) {
		if tg.ID() == id {
			return tg
		}
	}
	t.Fatalf("no target %s", id)
	return Target{}
}

func postgresServers(t *testing.T) Servers {
	return Servers{Postgres: testserver.Postgres(t).DSN(), KeyPrefix: "bench-test:"}
}

func mysqlServers(t *testing.T) Servers {
	return Servers{MySQL: testserver.MySQL(t).DSN(), KeyPrefix: "bench-test:"}
}

func TestSQLTargets(t *testing.T) {
	got := func(s Servers) string {
		var ids []string
		for _, tg := range sqlTargets(s) {
			ids = append(ids, tg.ID())
		}
		return strings.Join(ids, " ")
	}
	for _, c := range []struct {
		s    Servers
		want string
	}{
		{Servers{}, ""},
		{Servers{Redis: "x", ZooKeeper: "x"}, ""},
		{Servers{Postgres: "x"}, "simba/PostgreSQL pglock/PostgreSQL advisory lock/PostgreSQL floor/PostgreSQL"},
		{Servers{MySQL: "x"}, "simba/MariaDB go-mysql-lock/MariaDB floor/MariaDB"},
		{Servers{SQLite: "x"}, "simba/SQLite"},
	} {
		if g := got(c.s); g != c.want {
			t.Errorf("sqlTargets(%+v) = %q, want %q", c.s, g, c.want)
		}
	}
}

func TestSQLLockName(t *testing.T) {
	long := strings.Repeat("k", 300)
	for _, c := range []struct{ prefix, key string }{
		{"p:", "a"}, {"p:", "\x00"}, {"p:", "\xff"}, {"p:", long}, {strings.Repeat("é", 40), "x\x00"},
	} {
		for _, max := range []int{mysqlLockNameMax, nameMax} {
			n := lockName(c.prefix, c.key, max)
			if len(n) > max || strings.ContainsRune(n, 0) || !strings.HasPrefix(n, c.prefix[:min(len(c.prefix), 8)]) {
				t.Errorf("lockName(%q, %.10q, %d) = %q", c.prefix, c.key, max, n)
			}
		}
	}
	if lockName("p:", long, 64) == lockName("p:", long+"x", 64) {
		t.Error("two long keys share a name")
	}
}

func TestSQLSimbaPostgres(t *testing.T) {
	checkTarget(t, sqlTarget(t, postgresServers(t), "simba/PostgreSQL"), 5*time.Second)
}

func TestSQLPglock(t *testing.T) {
	// A shorter lease than the benchmark's: its waiters retry every lease.
	tg := newPglockTarget(postgresServers(t), time.Second, 250*time.Millisecond)
	checkTarget(t, tg, 5*time.Second)
}

func TestSQLAdvisory(t *testing.T) {
	checkTarget(t, sqlTarget(t, postgresServers(t), "advisory lock/PostgreSQL"), 5*time.Second)
}

func TestSQLFloorPostgres(t *testing.T) {
	checkTarget(t, sqlTarget(t, postgresServers(t), "floor/PostgreSQL"), floorLease+5*time.Second)
}

func TestSQLFloorMySQL(t *testing.T) {
	checkTarget(t, sqlTarget(t, mysqlServers(t), "floor/MariaDB"), floorLease+5*time.Second)
}

// TestSQLFloorRetake: a floor client takes a row it freed last with a
// plain update (the next token), and when another holds it, waits.
func TestSQLFloorRetake(t *testing.T) {
	for _, c := range []struct {
		name string
		tg   func(*testing.T) Target
	}{
		{"postgres", func(t *testing.T) Target { return sqlTarget(t, postgresServers(t), "floor/PostgreSQL") }},
		{"mysql", func(t *testing.T) Target { return sqlTarget(t, mysqlServers(t), "floor/MariaDB") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			tg := c.tg(t)
			open := func() *sqlFloorClient {
				cl, err := tg.Open(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cl.Close() })
				return cl.(*sqlFloorClient)
			}
			c1, c2 := open(), open()
			lock := func(cl *sqlFloorClient) sqlFloorLock {
				t.Helper()
				l, err := cl.Lock(ctx, testKey)
				if err != nil {
					t.Fatal(err)
				}
				return l.(sqlFloorLock)
			}
			l := lock(c1)
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			again := lock(c1) // the retake
			if c.name == "postgres" && again.token != l.token+1 {
				t.Errorf("retake token %d after %d, want one more", again.token, l.token)
			}
			if err := again.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l2 := lock(c2)
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			if l, err := c1.Lock(short, testKey); err == nil {
				t.Errorf("c1 took the row c2 holds, by its retake")
				_ = l.Unlock(ctx)
			}
			if err := l2.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSQLPostgresOps(t *testing.T) {
	checkOpsOwn(t, pgOps(postgresServers(t).Postgres))
}

func TestSQLSimbaMySQL(t *testing.T) {
	checkTarget(t, sqlTarget(t, mysqlServers(t), "simba/MariaDB"), 5*time.Second)
}

func TestSQLMySQLLock(t *testing.T) {
	checkTarget(t, sqlTarget(t, mysqlServers(t), "go-mysql-lock/MariaDB"), 5*time.Second, mysqlLockLeak)
}

func TestSQLMySQLOps(t *testing.T) {
	checkOpsOwn(t, mysqlOps(mysqlServers(t).MySQL))
}

func TestSQLSimbaSQLite(t *testing.T) {
	s := Servers{SQLite: filepath.Join(t.TempDir(), "bench.db"), KeyPrefix: "bench-test:"}
	checkTarget(t, sqlTarget(t, s, "simba/SQLite"), 5*time.Second)
}
