package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Environment variables that name external servers. When one is set, the
// helpers of its kind use that server and start nothing.
const (
	EnvRedis        = "SIMBA_TEST_REDIS"         // host:port
	EnvRedisCluster = "SIMBA_TEST_REDIS_CLUSTER" // host:port,host:port,… (any nodes of one cluster)
	EnvPostgres     = "SIMBA_TEST_POSTGRES"      // postgres://user[:pw]@host:port/db?sslmode=disable (may CREATE DATABASE)
	EnvMySQL        = "SIMBA_TEST_MYSQL"         // go-sql-driver DSN, user[:pw]@tcp(host:port)/ (may CREATE DATABASE)
	EnvZooKeeper    = "SIMBA_TEST_ZOOKEEPER"     // host:port,host:port,…
	// EnvDocker set to a false value ("0", "false") disables the container
	// provider even when a Docker engine answers.
	EnvDocker = "SIMBA_TEST_DOCKER"
)

// envList returns the comma-separated, trimmed, non-empty items of env var.
func envList(name string) []string {
	var out []string
	for _, s := range strings.Split(os.Getenv(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// hostPort splits addr and reports whether it is a usable host:port.
func hostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != ""
}

// lazy starts a shared server once per test binary and remembers the
// outcome, so a server that cannot start fails (or skips) every test that
// asks for it at once instead of being retried by each.
type lazy[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (l *lazy[T]) get(start func() (T, error)) (T, error) {
	l.once.Do(func() { l.v, l.err = start() })
	return l.v, l.err
}

// shared holds the closers of servers that live as long as the test binary.
var shared struct {
	sync.Mutex
	closers []func() error
}

// onShutdown registers f to run at Shutdown.
func onShutdown(f func() error) {
	shared.Lock()
	defer shared.Unlock()
	shared.closers = append(shared.closers, f)
}

// Shutdown stops every shared server this package started (containers
// included) and removes their directories. Call it after m.Run, or use
// [VerifyTestMain], which does. Without it, local servers are killed when the
// test binary exits (on Linux) and their directories are removed by the next
// test binary that starts a server.
func Shutdown() error {
	shared.Lock()
	closers := shared.closers
	shared.closers = nil
	shared.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	return errors.Join(errs...)
}

// VerifyTestMain runs the tests, stops the shared servers, and then fails
// the binary if goroutines leaked (goleak), with extra goleak options. Use
// it as the whole TestMain of a package that uses test servers:
//
//	func TestMain(m *testing.M) { testserver.VerifyTestMain(m) }
//
// Besides opts it ignores only the testcontainers reaper's connection, which
// lives until the process exits by design.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	opts = append(opts, goleak.IgnoreAnyFunction("github.com/testcontainers/testcontainers-go.(*Reaper).connect.func1"))
	goleak.VerifyTestMain(shutdownAfter{m}, opts...)
}

type shutdownAfter struct{ m *testing.M }

func (s shutdownAfter) Run() int {
	code := s.m.Run()
	if err := Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// group is a set of local processes sharing one work directory.
type group struct {
	dir   string
	procs []*Process
}

// close stops all processes (in parallel: JVMs take a while) and removes
// the work directory.
func (g *group) close() error {
	var wg sync.WaitGroup
	for _, p := range g.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Stop() // graceful: PostgreSQL frees its shared memory
		}()
	}
	wg.Wait()
	releaseStaleShm(filepath.Join(g.dir, "data", "postmaster.pid")) // a killed PostgreSQL's
	if err := os.RemoveAll(g.dir); err != nil {
		return fmt.Errorf("testserver: %w", err)
	}
	return nil
}

// private ties a group's life to the test.
func private(t testing.TB, g *group) {
	t.Cleanup(func() {
		if err := g.close(); err != nil {
			t.Error(err)
		}
	})
}

// logStart logs how long a server took to serve.
func logStart(t testing.TB, what string, begin time.Time) {
	t.Helper()
	t.Logf("testserver: %s ready (waited %v)", what, time.Since(begin).Round(time.Millisecond))
}

// sharedServer starts the server of one kind that the tests of this binary
// share: a container when a Docker engine answers, else (unless
// SIMBA_TEST_DOCKER=1) a local process made by start; Shutdown stops either.
// private names the helper to use for a controllable server of that kind.
func sharedServer(name string, spec containerSpec, start func() (*group, error), private string) (*Process, error) {
	r, note, ok, cerr := viaContainer(spec)
	if ok {
		return detached(r.describe(name), r.endpoint, "container shared by the tests of this binary"), nil
	}
	if containerMode() == dockerRequired {
		if cerr != nil {
			return nil, cerr
		}
		return nil, dockerMissing(name, note)
	}
	g, err := start()
	if err != nil {
		return nil, errors.Join(cerr, err)
	}
	onShutdown(g.close)
	return detached(name, g.procs[0].Addr(), "local server shared by the tests of this binary; use "+private), nil
}
