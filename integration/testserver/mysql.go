package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

var sharedMySQL lazy[*sqlBackend]

// MySQL returns a MySQL-compatible server with a fresh database for the
// test (dropped when the test ends): the server named by SIMBA_TEST_MYSQL,
// else a MariaDB container when Docker answers, else a local MariaDB shared
// by the tests of this binary. The server is not controllable (see
// PrivateMySQL).
func MySQL(t testing.TB) *SQLServer {
	t.Helper()
	if dsn := os.Getenv(EnvMySQL); dsn != "" {
		b, err := envMySQL(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return b.newDatabase(t)
	}
	begin := time.Now()
	b, err := sharedMySQL.get(func() (*sqlBackend, error) {
		p, err := sharedServer("mysql", containerSpec{
			image: imageMySQL, port: "3306/tcp",
			env:   map[string]string{"MYSQL_ALLOW_EMPTY_PASSWORD": "yes"},
			ready: func(ctx context.Context, a string) error { return pingSQL(ctx, "mysql", myDSN(a, "")) },
		}, func() (*group, error) { return startMariaDB(nil) }, "PrivateMySQL")
		if err != nil {
			return nil, err
		}
		return myBackend(p, true), nil
	})
	need(t, err)
	logStart(t, "shared "+b.proc.String(), begin)
	return b.newDatabase(t)
}

// PrivateMySQL starts a local MariaDB for this test alone (with a fresh
// database), stopped when the test ends. Its control methods work and it
// keeps its data across restarts.
func PrivateMySQL(t testing.TB) *SQLServer {
	t.Helper()
	return PrivateMySQLWith(t)
}

// PrivateMySQLWith is [PrivateMySQL] with options (a [ServerClock]).
func PrivateMySQLWith(t testing.TB, opts ...ServerOption) *SQLServer {
	t.Helper()
	return privateSQL(t, opts, false, startMariaDB, myBackend)
}

// myDSN is the go-sql-driver DSN of database db as root without a password.
func myDSN(addr, db string) string { return "root@tcp(" + addr + ")/" + db }

func quoteMySQL(n string) string { return "`" + n + "`" }

// myBackend describes a server this package started (or a container).
func myBackend(p *Process, drop bool) *sqlBackend {
	b := &sqlBackend{
		proc: p, driver: "mysql", admin: myDSN(p.Addr(), ""),
		dsnFor: func(db string) string { return myDSN(p.Addr(), db) },
		quote:  quoteMySQL,
	}
	if drop {
		b.dropSQL = func(q string) string { return "DROP DATABASE IF EXISTS " + q }
	}
	return b
}

// envMySQL describes the server of a SIMBA_TEST_MYSQL DSN.
func envMySQL(dsn string) (*sqlBackend, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("testserver: %s: %w", EnvMySQL, err)
	}
	withDB := func(db string) string {
		c := cfg.Clone()
		c.DBName = db
		return c.FormatDSN()
	}
	return &sqlBackend{
		proc: detached("mysql", cfg.Addr, "named by "+EnvMySQL), driver: "mysql", admin: withDB(""),
		dsnFor: withDB, quote: quoteMySQL,
		dropSQL: func(q string) string { return "DROP DATABASE IF EXISTS " + q },
	}, nil
}

// mariaDBBinaries finds the server and the install script.
func mariaDBBinaries() (server, install string, err error) {
	missing := func(d string) error {
		return &MissingError{Server: "mysql", Package: "mariadb-server", Env: EnvMySQL, Detail: d}
	}
	if !localSupported {
		return "", "", missing("not a Unix system")
	}
	server, ok := lookBinary([]string{"mariadbd", "mysqld"}, "/usr/sbin", "/usr/local/bin", "/opt/homebrew/bin")
	if !ok {
		return "", "", missing("mariadbd not found")
	}
	install, ok = lookBinary([]string{"mariadb-install-db", "mysql_install_db"}, "/usr/bin", "/usr/local/bin", "/opt/homebrew/bin")
	if !ok {
		return "", "", missing("mariadb-install-db not found")
	}
	return server, install, nil
}

// startMariaDB installs a data directory in a new work directory and starts
// MariaDB on a free port; root has no password on 127.0.0.1.
func startMariaDB(env []string) (*group, error) {
	server, install, err := mariaDBBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := newWorkDir("mysql")
	if err != nil {
		return nil, err
	}
	g := &group{dir: dir}
	data := filepath.Join(dir, "data")
	err = mariaDBTemplate.copyTo("mysql", data, -1, -1, func(data string) error { return installDB(install, data) })
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
		args := []string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1", "--socket=" + filepath.Join(dir, "mysqld.sock"),
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--tmpdir=" + dir, "--skip-name-resolve", "--skip-log-bin",
			"--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=64M", "--max-connections=500"}
		if os.Geteuid() == 0 {
			args = append(args, "--user=root") // mariadbd refuses root without it
		}
		p := newProcess("mysql", a, procSpec{
			path: server, args: args, dir: dir, logPath: filepath.Join(dir, "mysqld.log"),
			uid: -1, gid: -1, env: env,
			ready: func(ctx context.Context) error { return pingSQL(ctx, "mysql", myDSN(a, "")) },
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

// installDB creates the system tables in data: root without a password on
// 127.0.0.1, no test database, no anonymous users.
func installDB(install, data string) error {
	cmd := exec.Command(install, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	cmd.Dir = filepath.Dir(data)
	// Its bootstrap server's temporary tables go to TMPDIR, /tmp by
	// default, named by process id: with pids wrapping at 32768 on a
	// busy machine, a bootstrap beside another make test failed on a
	// temporary table gone under it ("Could not remove temporary table:
	// '/tmp/#sql-temptable-2f8-1-3'", then "Unknown table
	// 'mysql.tmp_user_sys'"). A directory of its own takes /tmp out of it.
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Dir(data))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testserver: %s: %w\n%s", filepath.Base(install), err, out)
	}
	return nil
}
