//go:build unix

package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Store kinds.
const (
	kindSQLite   = "sqlite"
	kindPostgres = "postgres"
	kindMySQL    = "mysql"
	kindRedis    = "redis"
	kindZK       = "zk"
)

// target is a parsed store URL: what to open, and how to name it in messages.
type target struct {
	kind    string
	display string // the URL without its password
	dsn     string // SQL: the driver's data source name; SQLite: the file path
	defPath bool   // SQLite: the default file, whose directory simba creates

	redis   *redis.Options        // a single Redis (or nil)
	cluster *redis.ClusterOptions // a Redis Cluster (or nil)
	servers []string              // ZooKeeper
	root    string                // ZooKeeper
}

// storeTarget resolves --store, else SIMBA_STORE, else the default SQLite file.
func (c *cli) storeTarget(flagValue string) (target, error) {
	raw := flagValue
	if raw == "" {
		raw = c.getenv("SIMBA_STORE")
	}
	if raw == "" {
		p, err := c.defaultSQLitePath()
		if err != nil {
			return target{}, err
		}
		return target{kind: kindSQLite, display: "sqlite://" + p, dsn: p, defPath: true}, nil
	}
	t, err := parseStoreURL(raw)
	if err != nil {
		return target{}, withCode(codeUsage, err)
	}
	return t, nil
}

// defaultSQLitePath is $XDG_STATE_HOME/simba/simba.db, else
// $HOME/.local/state/simba/simba.db.
func (c *cli) defaultSQLitePath() (string, error) {
	if d := c.getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "simba", "simba.db"), nil
	}
	if h := c.getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "simba", "simba.db"), nil
	}
	return "", fail(codeUsage, "no store: set --store or SIMBA_STORE (HOME is not set for the default SQLite file)")
}

// parseStoreURL parses a store URL; its errors name the URL without password.
func parseStoreURL(raw string) (target, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return target{}, fmt.Errorf("bad store URL %q: want sqlite://, postgres://, mysql://, redis://, rediss:// or zk://", redactRaw(raw))
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3":
		return parseSQLite(rest)
	case "postgres", "postgresql":
		return parsePostgres(raw)
	case "mysql":
		return parseMySQL(raw)
	case "redis", "rediss":
		return parseRedis(raw)
	case "zk", "zookeeper":
		return parseZK(raw)
	}
	return target{}, fmt.Errorf("bad store URL %q: unknown scheme %q (want sqlite, postgres, mysql, redis, rediss or zk)", redactRaw(raw), scheme)
}

// redactRaw hides the password of a URL that may not parse.
func redactRaw(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if user, _, hasPW := strings.Cut(rest[:at], ":"); hasPW {
				return scheme + "://" + user + ":xxxxx" + rest[at:]
			}
		}
	}
	return raw
}

func parseSQLite(p string) (target, error) {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return target{}, fmt.Errorf("bad store URL %q: a SQLite path takes no query or fragment", "sqlite://"+p)
	}
	if p == "" {
		return target{}, fmt.Errorf("bad store URL %q: no file path (sqlite://PATH or sqlite:///ABS/PATH)", "sqlite://")
	}
	return target{kind: kindSQLite, display: "sqlite://" + p, dsn: p}, nil
}

func parsePostgres(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("bad store URL %q: %v", redactRaw(raw), urlErr(err))
	}
	if _, err := pgx.ParseConfig(raw); err != nil {
		return target{}, fmt.Errorf("bad store URL %q: %v", u.Redacted(), err)
	}
	return target{kind: kindPostgres, display: u.Redacted(), dsn: raw}, nil
}

// parseMySQL turns mysql://USER:PW@HOST:PORT/DB?PARAMS into a go-sql-driver
// DSN, with interpolateParams=true (one round trip per statement) unless the
// URL says otherwise.
func parseMySQL(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("bad store URL %q: %v", redactRaw(raw), urlErr(err))
	}
	bad := func(format string, args ...any) (target, error) {
		return target{}, fmt.Errorf("bad store URL %q: %s", u.Redacted(), fmt.Sprintf(format, args...))
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return bad("want mysql://USER:PW@HOST:PORT/DATABASE")
	}
	if u.Hostname() == "" {
		return bad("no host")
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = hostPort(u.Host, "3306")
	cfg.DBName = db
	cfg.InterpolateParams = true
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	dsn := cfg.FormatDSN()
	if q := u.RawQuery; q != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + q
	}
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return bad("%v", err)
	}
	return target{kind: kindMySQL, display: u.Redacted(), dsn: dsn}, nil
}

// parseRedis takes redis.ParseURL's URLs; several comma-separated hosts
// make a Redis Cluster.
func parseRedis(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("bad store URL %q: %v", redactRaw(raw), urlErr(err))
	}
	display := u.Redacted()
	hosts := strings.Split(u.Host, ",")
	if len(hosts) == 1 {
		o, err := redis.ParseURL(raw)
		if err != nil {
			return target{}, fmt.Errorf("bad store URL %q: %v", display, err)
		}
		o.ContextTimeoutEnabled = true
		return target{kind: kindRedis, display: display, redis: o}, nil
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return target{}, fmt.Errorf("bad store URL %q: a Redis Cluster has no database %q", display, p)
	}
	first := *u
	first.Host = hosts[0]
	first.Path = ""
	q := first.Query()
	for _, h := range hosts[1:] {
		if h == "" {
			return target{}, fmt.Errorf("bad store URL %q: empty host in the list", display)
		}
		q.Add("addr", hostPort(h, "6379"))
	}
	first.RawQuery = q.Encode()
	o, err := redis.ParseClusterURL(first.String())
	if err != nil {
		return target{}, fmt.Errorf("bad store URL %q: %v", display, err)
	}
	o.ContextTimeoutEnabled = true
	return target{kind: kindRedis, display: display, cluster: o}, nil
}

// parseZK parses zk://HOST:PORT[,HOST:PORT...][/ROOT].
func parseZK(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("bad store URL %q: %v", redactRaw(raw), urlErr(err))
	}
	bad := func(format string, args ...any) (target, error) {
		return target{}, fmt.Errorf("bad store URL %q: %s", u.Redacted(), fmt.Sprintf(format, args...))
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return bad("want zk://HOST:PORT[,HOST:PORT...][/ROOT]")
	}
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return bad("empty host")
		}
		servers = append(servers, hostPort(h, "2181"))
	}
	root := u.Path
	if root == "" || root == "/" {
		root = "/simba"
	}
	if path.Clean(root) != root {
		return bad("root %q is not a clean absolute path", root)
	}
	return target{kind: kindZK, display: u.Redacted(), servers: servers, root: root}, nil
}

// hostPort adds the default port to a host without one.
func hostPort(h, port string) string {
	if _, _, err := net.SplitHostPort(h); err == nil {
		return h
	}
	return net.JoinHostPort(strings.Trim(h, "[]"), port)
}

// urlErr drops the URL that url.Parse repeats in its errors (password included).
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
