package testserver

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var sharedPostgres lazy[*sqlBackend]

// Postgres returns a PostgreSQL server with a fresh database for the test
// (dropped when the test ends): the server named by SIMBA_TEST_POSTGRES,
// else a container when Docker answers, else a local PostgreSQL shared by
// the tests of this binary. The server is not controllable (see
// PrivatePostgres).
func Postgres(t testing.TB) *SQLServer {
	t.Helper()
	if u := os.Getenv(EnvPostgres); u != "" {
		b, err := envPostgres(u)
		if err != nil {
			t.Fatal(err)
		}
		return b.newDatabase(t)
	}
	begin := time.Now()
	b, err := sharedPostgres.get(func() (*sqlBackend, error) {
		p, err := sharedServer("postgres", containerSpec{
			image: imagePostgres, port: "5432/tcp",
			env: map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
			cmd: []string{"postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
				"-c", "full_page_writes=off", "-c", "max_connections=300"},
			ready: func(ctx context.Context, a string) error { return pingSQL(ctx, "pgx", pgURL(a, "postgres")) },
		}, func() (*group, error) { return startPostgres(nil) }, "PrivatePostgres")
		if err != nil {
			return nil, err
		}
		return pgBackend(p, true), nil
	})
	need(t, err)
	logStart(t, "shared "+b.proc.String(), begin)
	return b.newDatabase(t)
}

// PrivatePostgres starts a local PostgreSQL for this test alone (with a
// fresh database), stopped when the test ends. Its control methods work and
// it keeps its data across restarts.
func PrivatePostgres(t testing.TB) *SQLServer {
	t.Helper()
	return PrivatePostgresWith(t)
}

// PrivatePostgresWith is [PrivatePostgres] with options (a [ServerClock]).
func PrivatePostgresWith(t testing.TB, opts ...ServerOption) *SQLServer {
	t.Helper()
	// PostgreSQL's postmaster reads the clock in signal handlers: the
	// single-threaded libfaketime (st), not libfaketimeMT.
	return privateSQL(t, opts, true, startPostgres, pgBackend)
}

// pgURL is the pgx URL of database db on a server without a password.
func pgURL(addr, db string) string {
	return "postgres://postgres@" + addr + "/" + db + "?sslmode=disable"
}

// pgBackend describes a server this package started (or a container).
func pgBackend(p *Process, drop bool) *sqlBackend {
	b := &sqlBackend{
		proc: p, driver: "pgx", admin: pgURL(p.Addr(), "postgres"),
		dsnFor: func(db string) string { return pgURL(p.Addr(), db) },
		quote:  func(n string) string { return `"` + n + `"` },
	}
	if drop {
		b.dropSQL = func(q string) string { return "DROP DATABASE IF EXISTS " + q + " WITH (FORCE)" }
	}
	return b
}

// envPostgres describes the server of a SIMBA_TEST_POSTGRES URL.
func envPostgres(raw string) (*sqlBackend, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return nil, fmt.Errorf("testserver: %s must be a postgres:// URL with a host, got %q", EnvPostgres, raw)
	}
	withDB := func(db string) string {
		c := *u
		c.Path = "/" + db
		return c.String()
	}
	admin := raw
	if strings.Trim(u.Path, "/") == "" {
		admin = withDB("postgres")
	}
	return &sqlBackend{
		proc: detached("postgres", u.Host, "named by "+EnvPostgres), driver: "pgx", admin: admin,
		dsnFor:  withDB,
		quote:   func(n string) string { return `"` + n + `"` },
		dropSQL: func(q string) string { return "DROP DATABASE IF EXISTS " + q + " WITH (FORCE)" },
	}, nil
}

// postgresBinDir finds the directory with initdb and postgres: the newest
// /usr/lib/postgresql/N/bin (Debian), else the directory of initdb in PATH.
func postgresBinDir() (string, error) {
	if !localSupported {
		return "", &MissingError{Server: "postgres", Package: "postgresql", Env: EnvPostgres, Detail: "not a Unix system"}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) int { n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return n }
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, ok := lookBinary([]string{"initdb"}, "/usr/local/bin", "/opt/homebrew/bin"); ok {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	return "", &MissingError{Server: "postgres", Package: "postgresql", Env: EnvPostgres, Detail: "no /usr/lib/postgresql/*/bin/initdb and no initdb in PATH"}
}

// startPostgres initialises a cluster in a new work directory and starts
// it on a free port. PostgreSQL refuses to run as root: as root it runs as
// the postgres system user.
func startPostgres(env []string) (*group, error) {
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	uid, gid, err := runAs(true, "postgres")
	if err != nil {
		return nil, err
	}
	dir, err := newWorkDir("postgres")
	if err != nil {
		return nil, err
	}
	g := &group{dir: dir}
	err = handOver(dir, uid, gid)
	if err == nil {
		err = postgresTemplate.copyTo("postgres", filepath.Join(dir, "data"), uid, gid,
			func(data string) error { return initdb(bin, data, uid, gid) })
	}
	if err != nil {
		_ = g.close()
		return nil, err
	}
	err = retryPorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		a := addr(port)
		p := newProcess("postgres", a, procSpec{
			path: filepath.Join(bin, "postgres"),
			args: []string{"-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(port),
				"-c", "listen_addresses=127.0.0.1", "-k", dir,
				"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
				"-c", "dynamic_shared_memory_type=mmap", "-c", "max_connections=300"},
			dir: dir, logPath: filepath.Join(dir, "postgres.log"),
			uid: uid, gid: gid, stopSig: syscall.SIGINT, // SIGINT: fast shutdown
			env:   env,
			ready: func(ctx context.Context) error { return pingSQL(ctx, "pgx", pgURL(a, "postgres")) },
		})
		g.procs = []*Process{p}
		return p.Start()
	})
	if err != nil {
		_ = g.close()
		return nil, err
	}
	return g, nil
}

// initdb initialises a cluster in data (trust authentication, superuser
// postgres, no fsync); data's parent must belong to uid when uid >= 0.
func initdb(bin, data string, uid, gid int) error {
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data,
		"-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions")
	cmd.Dir = filepath.Dir(data)
	cmd.SysProcAttr = sysProcAttr(uid, gid)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testserver: initdb: %w\n%s", err, out)
	}
	return nil
}
