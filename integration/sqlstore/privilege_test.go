package sqlstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/schema"
)

// TestLeastPrivilegeRole: a database user that may only SELECT, INSERT,
// UPDATE and DELETE on simba_mutex runs the whole protocol — grant, renew
// (one and many), hand-off through the wait queue and push (LISTEN/NOTIFY
// and named locks need no privilege), release, prune — and cannot create
// anything.
func TestLeastPrivilegeRole(t *testing.T) {
	forAll(t, servers, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		admin := d.open(t, dsn)
		user := fmt.Sprintf("simba_app_%08x", rand.Uint32())
		const password = "simba-test"
		var grants, cleanup []string
		var appDSN string
		switch d.schema {
		case schema.Postgres:
			grants = []string{
				fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", user, password),
				"GRANT SELECT, INSERT, UPDATE, DELETE ON simba_mutex TO " + user,
				"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
			}
			cleanup = []string{"DROP OWNED BY " + user, "DROP ROLE " + user}
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			u.User = url.UserPassword(user, password)
			appDSN = u.String()
		case schema.MySQL:
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			grants = []string{
				fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password),
				fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.simba_mutex TO '%s'@'%%'", cfg.DBName, user),
			}
			cleanup = []string{fmt.Sprintf("DROP USER '%s'@'%%'", user)}
			cfg.User, cfg.Passwd = user, password
			appDSN = cfg.FormatDSN()
		}
		for _, q := range grants {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() {
			for _, q := range cleanup {
				if _, err := admin.ExecContext(context.Background(), q); err != nil {
					t.Errorf("%s: %v", q, err)
				}
			}
		})
		app := d.open(t, appDSN)
		if _, err := app.ExecContext(ctx, "CREATE TABLE not_allowed (x int)"); err == nil {
			t.Fatalf("the restricted user could CREATE TABLE: the test does not restrict it")
		}
		a, b := d.newStore(t, appDSN), d.newStore(t, appDSN)
		holder, waiter := newManager(t, a, "holder"), newManager(t, b, "waiter")
		l, err := holder.Acquire(ctx, "least/privilege")
		if err != nil {
			t.Fatalf("Acquire as %s: %v", user, err)
		}
		time.Sleep(pushTTL/3 + 200*time.Millisecond) // one renewal
		if !l.Held() {
			t.Fatalf("the lease was lost: %v", l.Err())
		}
		took := handoff(t, holder, waiter, a, "least/handoff", nil)
		if took > pushed {
			t.Errorf("hand-off as %s took %v, want < %v", user, took, pushed)
		}
		if res, err := a.RenewMany(ctx, []lease.RenewRequest{{Name: "least/privilege", Contender: "holder",
			Token: l.Token(), TTL: pushTTL, Transition: pushTr}}); err != nil || res[0].Err != nil {
			t.Errorf("RenewMany as %s = %+v, %v", user, res, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release as %s: %v", user, err)
		}
		time.Sleep(5 * time.Millisecond)
		if n, err := a.Prune(ctx, time.Millisecond); err != nil || n == 0 {
			t.Errorf("Prune as %s = %d, %v; want the released rows deleted", user, n, err)
		}
	})
}
