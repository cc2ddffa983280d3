//go:build unix

package main

import (
	"slices"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestParseStoreURL checks what each URL form opens.
func TestParseStoreURL(t *testing.T) {
	t.Parallel()
	check := func(raw string) target {
		t.Helper()
		tg, err := parseStoreURL(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return tg
	}
	if tg := check("sqlite:///var/lib/app/locks.db"); tg.kind != kindSQLite || tg.dsn != "/var/lib/app/locks.db" {
		t.Errorf("sqlite absolute: %+v", tg)
	}
	if tg := check("sqlite://locks/a.db"); tg.dsn != "locks/a.db" {
		t.Errorf("sqlite relative: %+v", tg)
	}
	if tg := check("postgresql://app:pw@db:5432/app?sslmode=disable"); tg.kind != kindPostgres || tg.display != "postgresql://app:xxxxx@db:5432/app?sslmode=disable" {
		t.Errorf("postgres: %+v", tg)
	}

	tg := check("mysql://app:p%40ss:w@db.internal/app?tls=false")
	cfg, err := mysql.ParseDSN(tg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss:w" || cfg.Addr != "db.internal:3306" || cfg.DBName != "app" || !cfg.InterpolateParams {
		t.Errorf("mysql DSN %q: %+v", tg.dsn, cfg)
	}

	tg = check("redis://:pw@cache:6380/2")
	if tg.redis == nil || tg.redis.Addr != "cache:6380" || tg.redis.DB != 2 || tg.redis.Password != "pw" || !tg.redis.ContextTimeoutEnabled {
		t.Errorf("redis: %+v", tg.redis)
	}
	tg = check("rediss://h1:7000,h2,h3:7002")
	if tg.cluster == nil || !slices.Equal(tg.cluster.Addrs, []string{"h1:7000", "h2:6379", "h3:7002"}) || tg.cluster.TLSConfig == nil {
		t.Errorf("redis cluster: %+v", tg.cluster)
	}

	tg = check("zk://zk1,zk2:2182/apps/locks")
	if !slices.Equal(tg.servers, []string{"zk1:2181", "zk2:2182"}) || tg.root != "/apps/locks" {
		t.Errorf("zk: %+v", tg)
	}
	if tg := check("zk://zk1"); tg.root != "/simba" {
		t.Errorf("zk default root: %q", tg.root)
	}
}
