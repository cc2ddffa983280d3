package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/integration/testserver"
)

var (
	reportPath = flag.String("report", "", "run the benchmarks and write the report to this Markdown file (make bench)")
	only       = flag.String("only", "", "comma-separated parts of target IDs to run (e.g. redis, simba/postgresql); default all")
	scenarioFl = flag.String("scenario", "", "scenario letters to run (e.g. ac); default abcdef")
)

// The environment of a holder process (scenario f).
const (
	envHolder  = "SIMBA_BENCH_HOLDER"  // target ID
	envKey     = "SIMBA_BENCH_KEY"     // lock name
	envServers = "SIMBA_BENCH_SERVERS" // Servers as JSON
)

// TestMain stops the servers and checks for leaked goroutines, except
// go-mysql-lock's: a lock's refresher that ends by itself blocks forever
// sending to its own release channel (sanketplus/go-mysql-lock#5), and keeps
// its connection, whose watcher goroutine lives on too.
func TestMain(m *testing.M) {
	testserver.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/sanketplus/go-mysql-lock.Lock.Release"),
		goleak.IgnoreTopFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"))
}

// TestBench is make bench: it starts the servers, measures every target and
// writes the report given by -report. Without -report it is skipped.
func TestBench(t *testing.T) {
	if *reportPath == "" {
		t.Skip("make bench runs this (-report FILE)")
	}
	start := time.Now()
	o := Options{Scenarios: *scenarioFl, Logf: t.Logf}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	need := map[string]bool{}
	for _, tg := range Targets(allServers) {
		if o.Selected(tg) {
			need[tg.Backend] = true
		}
	}
	if len(need) == 0 {
		t.Fatalf("no target matches -only %q", *only)
	}
	s, versions := startServers(t, need)
	targets := slices.DeleteFunc(Targets(s), func(tg Target) bool { return !o.Selected(tg) })
	servers, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	o.Holder = func(id, key string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestHolder$", "-test.timeout", "3m")
		cmd.Env = append(os.Environ(), envHolder+"="+id, envKey+"="+key, envServers+"="+string(servers))
		return cmd
	}
	ctx := t.Context()
	tables := Run(ctx, s, targets, o)
	wall := time.Since(start)
	facts := machineFacts(ctx, versions)
	md := renderReport(facts, targets, tables, wall, *only != "" || *scenarioFl != "")
	svgPath := strings.TrimSuffix(*reportPath, ".md") + "-handoff.svg"
	if err := os.WriteFile(svgPath, []byte(renderChart(tables)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*reportPath, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and %s; the run took %v", *reportPath, filepath.Base(svgPath), wall.Round(time.Second))
}

// allServers names every server, to list the targets before any starts.
var allServers = Servers{Redis: "-", Postgres: "-", MySQL: "-", SQLite: "-", ZooKeeper: "-", Etcd: "-", KeyPrefix: "-"}

// startServers starts the servers of the backends in need (through
// integration/testserver, and etcd) and asks each for its version.
func startServers(t *testing.T, need map[string]bool) (Servers, map[string]string) {
	s := Servers{KeyPrefix: fmt.Sprintf("bench%x", time.Now().UnixNano()), ZKSessionS: 4}
	v := map[string]string{}
	ctx := t.Context()
	var redisUp time.Time
	if need["Redis"] {
		s.Redis = testserver.Redis(t).Addr()
		redisUp = time.Now()
		v["Redis"] = redisVersion(ctx, s.Redis)
	}
	if need["PostgreSQL"] {
		s.Postgres = testserver.Postgres(t).DSN()
		v["PostgreSQL"] = sqlVersion(ctx, "pgx", s.Postgres, "SHOW server_version")
	}
	if need["MariaDB"] {
		s.MySQL = testserver.MySQL(t).DSN()
		v["MariaDB"] = sqlVersion(ctx, "mysql", s.MySQL, "SELECT VERSION()")
	}
	if need["SQLite"] {
		s.SQLite = filepath.Join(t.TempDir(), "bench.db")
		v["SQLite"] = sqlVersion(ctx, "sqlite", ":memory:", "SELECT sqlite_version()")
	}
	if need["ZooKeeper"] {
		zk := testserver.ZooKeeper(t)
		s.ZooKeeper = strings.Join(zk.Servers(), ",")
		v["ZooKeeper"] = zkVersion(zk.Servers()[0])
	}
	if need["etcd"] {
		if s.Etcd, v["etcd"] = startEtcd(t); s.Etcd == "" {
			delete(v, "etcd")
		}
	}
	// simba's restart guard holds new locks back on a Redis younger than
	// ttl + transition + 1 s (redisstore.WithRestartGuard).
	if wait := time.Until(redisUp.Add(simbaTTL + simbaTransition + 2*time.Second)); need["Redis"] && wait > 0 {
		t.Logf("waiting %v until Redis is older than simba's restart guard", wait.Round(time.Second))
		time.Sleep(wait)
	}
	return s, v
}

// TestHolder is the holder process of scenario f: run by TestBench with
// the target, key and servers in its environment, it takes the lock, prints
// holdingLine and waits to be killed.
func TestHolder(t *testing.T) {
	id := os.Getenv(envHolder)
	if id == "" {
		t.Skip("run by TestBench")
	}
	var s Servers
	if err := json.Unmarshal([]byte(os.Getenv(envServers)), &s); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(Targets(s), func(tg Target) bool { return tg.ID() == id })
	if i < 0 {
		t.Fatalf("no target %q", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Targets(s)[i].Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(ctx, os.Getenv(envKey)); err != nil {
		t.Fatal(err)
	}
	fmt.Println(holdingLine)
	time.Sleep(2 * time.Minute) // killed long before
	t.Fatal("not killed")
}
