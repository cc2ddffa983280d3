package testserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ServerClock is the wall clock of private servers run under libfaketime
// (Debian package faketime): the servers read the machine's time plus an
// offset that [ServerClock.Step] changes while they run, without touching
// the machine's clock. Only CLOCK_REALTIME and its kin (gettimeofday,
// time) are offset; the monotonic clocks stay the machine's
// (FAKETIME_DONT_FAKE_MONOTONIC=1), as when an NTP daemon or an operator
// steps a host's clock.
//
// The offset lives in a file that libfaketime reads on every clock call
// (FAKETIME_TIMESTAMP_FILE with FAKETIME_NO_CACHE=1); a step replaces it
// atomically.
//
// Redis: Debian's redis-server allocates with jemalloc, whose start-up
// calls clock_gettime before libfaketime is initialised, and the process
// aborts. A server with a fake clock therefore also preloads glibc's
// libc_malloc_debug.so.0, which puts glibc's malloc in front of jemalloc
// (jemalloc is left for the statistics calls): the allocator differs from
// production's, the clock handling does not.
type ServerClock struct {
	path string
	lib  string

	mu     sync.Mutex
	offset time.Duration
}

// fakeTimeLibs are where the Debian and Ubuntu packages put libfaketime
// (the MT build: the servers are multi-threaded).
var fakeTimeLibs = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
	"/usr/lib/faketime/libfaketimeMT.so.1",
}

// NewServerClock makes a clock at offset 0 for the servers of one test
// (give it to them with [WithServerClock], [RedisServerClock] or
// [ZooKeeperServerClock]). Without libfaketime it skips the test, or fails
// it when CI is set.
func NewServerClock(t testing.TB) *ServerClock {
	t.Helper()
	c, err := newServerClock()
	need(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(c.path)) })
	return c
}

func newServerClock() (*ServerClock, error) {
	lib := ""
	for _, l := range fakeTimeLibs {
		if _, err := os.Stat(l); err == nil {
			lib = l
			break
		}
	}
	if lib == "" || !localSupported {
		return nil, &MissingError{Server: "libfaketime", Package: "faketime", Detail: "libfaketimeMT.so.1 not found"}
	}
	dir, err := newWorkDir("clock")
	if err != nil {
		return nil, err
	}
	// Servers that run as another user (PostgreSQL as postgres) read it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	c := &ServerClock{path: filepath.Join(dir, "faketime.rc"), lib: lib}
	if err := c.write(0); err != nil {
		return nil, err
	}
	return c, nil
}

// Step moves the servers' clock by d (forward when positive, backward when
// negative) at once; the offsets of successive steps add up.
func (c *ServerClock) Step(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(c.offset + d); err != nil {
		return err
	}
	c.offset += d
	return nil
}

// Offset returns how far the servers' clock is ahead of the machine's
// (negative: behind).
func (c *ServerClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// write replaces the offset file: libfaketime's relative offset in
// seconds, with a fraction ("+1.250000", "-0.300000").
func (c *ServerClock) write(off time.Duration) error {
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	text := sign + strconv.FormatFloat(off.Seconds(), 'f', 6, 64) + "\n"
	tmp := c.path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return fmt.Errorf("testserver: server clock: %w", err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return fmt.Errorf("testserver: server clock: %w", err)
	}
	return nil
}

// env is the environment that puts a server under the clock; glibcMalloc
// also preloads glibc's malloc (for jemalloc binaries: see ServerClock);
// cached lets libfaketime read the offset file once a second instead of on
// every call (for a JVM, which reads the clock so often that reading the
// file each time slows its start tenfold): a step then takes effect
// within a second.
//
// PostgreSQL 15's postmaster is single-threaded and does its work, clock
// reads included, in signal handlers: under libfaketimeMT, whose calls
// take a lock, a SIGCHLD that lands inside a clock call can deadlock it
// (the likely cause of new connections hanging at start-up in loaded
// campaigns). It gets the single-threaded libfaketime.so.1 (st).
func (c *ServerClock) env(glibcMalloc, cached, st bool) []string {
	preload := c.lib
	if st {
		preload = filepath.Join(filepath.Dir(c.lib), "libfaketime.so.1")
	}
	if glibcMalloc {
		m := filepath.Join(filepath.Dir(filepath.Dir(c.lib)), "libc_malloc_debug.so.0")
		if _, err := os.Stat(m); err == nil {
			preload = m + " " + preload
		}
	}
	cache := "FAKETIME_NO_CACHE=1"
	if cached {
		cache = "FAKETIME_CACHE_DURATION=1"
	}
	return []string{
		"LD_PRELOAD=" + preload,
		"FAKETIME_TIMESTAMP_FILE=" + c.path,
		cache,
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// A ServerOption configures a private SQL server ([PrivatePostgresWith],
// [PrivateMySQLWith]).
type ServerOption func(*serverConfig)

type serverConfig struct{ clock *ServerClock }

// WithServerClock runs the server under c: its wall clock is the
// machine's plus c's offset.
func WithServerClock(c *ServerClock) ServerOption {
	return func(s *serverConfig) { s.clock = c }
}

// RedisServerClock runs a [PrivateRedis] under c (with glibc's malloc:
// see [ServerClock]).
func RedisServerClock(c *ServerClock) RedisOption {
	return func(r *redisConfig) { r.clock = c }
}

// ZooKeeperServerClock runs a [PrivateZooKeeper]'s JVM under c; a step
// takes effect within a second (see [ServerClock]'s env).
func ZooKeeperServerClock(c *ServerClock) ZooKeeperOption {
	return func(z *zkSettings) { z.clock = c }
}

// clockEnv is the environment of a server under c (nil when c is nil).
func clockEnv(c *ServerClock, glibcMalloc, cached, st bool) []string {
	if c == nil {
		return nil
	}
	return c.env(glibcMalloc, cached, st)
}
