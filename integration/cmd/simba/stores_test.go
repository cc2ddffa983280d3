//go:build unix

package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/integration/testserver"
)

// Store URLs of the test servers, one fresh database, key space or root per
// test. Redis has no per-test prefix in a URL: tests use names of their own.

func sqliteURL(e *env) string { return "sqlite://" + e.path("locks.db") }

func postgresURL(t *testing.T) string {
	return testserver.Postgres(t).DSN() // already a postgres:// URL
}

func mysqlURL(t *testing.T) string {
	cfg, err := mysql.ParseDSN(testserver.MySQL(t).DSN())
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName, User: url.User(cfg.User)}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	}
	return u.String()
}

func redisURL(t *testing.T) string {
	return "redis://" + testserver.Redis(t).Addr()
}

func zkURL(t *testing.T) string {
	s := testserver.ZooKeeper(t)
	return "zk://" + strings.Join(s.Servers(), ",") + s.Root()
}

// uniqueName is a lock name no other test uses (Redis is shared).
func uniqueName(t *testing.T, base string) string {
	return base + "/" + strings.ReplaceAll(t.Name(), "/", ".")
}
