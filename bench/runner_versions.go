package bench

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
)

// sqlVersion runs query (one value) on a database of driver, for the report.
func sqlVersion(ctx context.Context, driver, dsn, query string) string {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, query).Scan(&v); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return v
}

// zkVersion asks a ZooKeeper server with the srvr four-letter word.
func zkVersion(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Zookeeper version: "); ok {
			v, _, _ = strings.Cut(v, ",")
			return v
		}
	}
	return "unknown"
}

// A fact is one line of the report's machine section.
type fact struct{ name, value string }

// machineFacts describes the machine, the servers (versions) and the
// libraries (from the build information) of the run.
func machineFacts(ctx context.Context, servers map[string]string) []fact {
	fs := []fact{
		{"CPU", fmt.Sprintf("%d × %s", runtime.NumCPU(), cpuModel())},
		{"OS", runtime.GOOS + "/" + runtime.GOARCH + " " + kernel(ctx)},
		{"Go", runtime.Version()},
	}
	for _, b := range backends {
		if v, ok := servers[b]; ok {
			fs = append(fs, fact{b, v})
		}
	}
	if rev, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		fs = append(fs, fact{"simba-go", "commit " + strings.TrimSpace(string(rev))})
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			for _, p := range []string{"github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "cirello.io/pglock",
				"github.com/sanketplus/go-mysql-lock", "github.com/go-zookeeper/zk", "go.etcd.io/etcd/client/v3",
				"github.com/redis/go-redis/v9", "github.com/jackc/pgx/v5", "github.com/lib/pq", "github.com/go-sql-driver/mysql", "modernc.org/sqlite"} {
				if d.Path == p {
					fs = append(fs, fact{p, d.Version})
				}
			}
		}
	}
	return fs
}

// backends lists the backends in report order.
var backends = []string{"Redis", "PostgreSQL", "MariaDB", "SQLite", "ZooKeeper", "etcd"}

func cpuModel() string {
	b, err := exec.Command("sh", "-c", "grep -m1 'model name' /proc/cpuinfo").Output()
	if err != nil {
		return runtime.GOARCH
	}
	_, v, _ := strings.Cut(string(b), ":")
	return strings.TrimSpace(v)
}

func kernel(ctx context.Context) string {
	b, err := exec.CommandContext(ctx, "uname", "-r").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
