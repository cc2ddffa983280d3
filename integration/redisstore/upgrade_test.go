package redisstore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// A rolling upgrade runs Stores of two versions on the same locks. The
// scripts of the version before the constants moved into the scripts'
// text (f46905e: every key of a lock in KEYS; contender, ttl, transition,
// hand-off window, publish command and retention in ARGV) are kept in
// testdata/v0, frozen, and run here as such a Store would run them.

// previousStore runs the acquire and release scripts of testdata/v0 on a
// standalone server (the restart guard off, as WithRestartGuard(false)).
type previousStore struct {
	c                *redis.Client
	prefix           string
	handoff          time.Duration
	acquire, release *redis.Script
}

func newPreviousStore(t testing.TB, c *redis.Client, prefix string, handoff time.Duration) *previousStore {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "v0", name+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	info, err := c.Info(bg, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	runID := ""
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok && len(v) >= 16 {
			runID = v[:16]
		}
	}
	if runID == "" {
		t.Fatal("no run_id in INFO server")
	}
	lib := read("lib")
	return &previousStore{
		c: c, prefix: prefix, handoff: handoff,
		acquire: redis.NewScript(fmt.Sprintf("local LIFE, START, GUARD = '%s', 0, false\n", runID) +
			read("acquirefast") + lib + read("acquire")),
		release: redis.NewScript(read("releasefast") + lib + read("release")),
	}
}

// keys are the KEYS of the previous version's scripts for lock name.
func (p *previousStore) keys(name string) []string {
	base := strings.TrimSuffix(recordKeyOf(p.prefix, name), ":r")
	return []string{base + ":r", base + ":q", base + ":qe", base + ":ev", p.prefix + "{~}:epoch"}
}

// long is the ttl and transition of the upgrade test's waiters: their
// turns (at most their ttl + transition) never lapse while it runs.
const long = 20 * time.Second

// Acquire returns the owner and token after contender's acquire for long.
func (p *previousStore) Acquire(t testing.TB, name, contender string) (string, uint64) {
	t.Helper()
	v, err := p.acquire.Run(bg, p.c, p.keys(name), contender, long.Milliseconds(), long.Milliseconds(),
		p.handoff.Milliseconds(), "PUBLISH", redisstore.DefaultRetention.Milliseconds()).Result()
	if err != nil {
		t.Fatalf("previous version's acquire of %q by %q: %v", name, contender, err)
	}
	switch v := v.(type) {
	case string: // its fast path: the token of a grant to contender
		return contender, parseToken(t, v)
	case []any:
		if len(v) == 4 {
			if owner, ok := v[0].(string); ok {
				tok, _ := v[1].(string)
				return owner, parseToken(t, tok)
			}
		}
	}
	t.Fatalf("previous version's acquire: reply %T %v", v, v)
	return "", 0
}

func parseToken(t testing.TB, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("token %q: %v", s, err)
	}
	return n
}

// Release returns the release script's 1 (ended) or 0.
func (p *previousStore) Release(t testing.TB, name, contender string, token uint64) int64 {
	t.Helper()
	v, err := p.release.Run(bg, p.c, p.keys(name)[:4], contender, strconv.FormatUint(token, 10),
		p.handoff.Milliseconds(), "PUBLISH", redisstore.DefaultRetention.Milliseconds()).Int64()
	if err != nil {
		t.Fatalf("previous version's release of %q by %q: %v", name, contender, err)
	}
	return v
}

// TestRollingUpgradeSharesLocks: a Store of this version and one of the
// previous version, on one server with the same options, share a lock:
// each one's grant keeps the other's contenders out and queues them, each
// one's release hands the lock to a waiter the other queued (and wakes
// it on the lock's channel), and tokens keep increasing, whichever
// version grants.
func TestRollingUpgradeSharesLocks(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	const handoff = time.Minute
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithHandoff(handoff))
	old := newPreviousStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), handoff)
	acquire := func(contender string) lease.Record {
		t.Helper()
		rec, err := s.Acquire(bg, "u", contender, long, long)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}

	owner, tok := old.Acquire(t, "u", "z")
	if owner != "z" {
		t.Fatalf("previous version's first acquire: owner %q", owner)
	}
	if rec := acquire("a"); rec.Held("a") { // a waits, queued by this version
		t.Fatalf("a's acquire while z holds: %+v", rec)
	}
	woken := watch(t, s, "u", "a")
	if old.Release(t, "u", "z", tok) != 1 {
		t.Fatal("previous version's release of z's grant: 0")
	}
	wantEvent(t, "a, woken by the previous version's release", woken, lease.Event{Name: "u"})
	if rec := acquire("y"); rec.Held("y") {
		t.Fatalf("y's acquire in a's turn: %+v", rec)
	}
	if err := s.Release(bg, "u", "y", 0); !errors.Is(err, lease.ErrNotHeld) { // y leaves the queue
		t.Fatalf("y's withdrawal: %v", err)
	}
	rec := acquire("a")
	if !rec.Held("a") || rec.Token <= tok {
		t.Fatalf("a's acquire in its turn: %+v (after token %d)", rec, tok)
	}
	tok = rec.Token

	if owner, _ := old.Acquire(t, "u", "b"); owner != "a" { // b waits, queued by the previous version
		t.Fatalf("previous version's acquire while a holds: owner %q", owner)
	}
	if err := s.Release(bg, "u", "a", tok); err != nil {
		t.Fatal(err)
	}
	if owner, _ := old.Acquire(t, "u", "x"); owner != "" {
		t.Fatalf("previous version's acquire in b's turn: owner %q", owner)
	}
	owner, next := old.Acquire(t, "u", "b")
	if owner != "b" || next <= tok {
		t.Fatalf("previous version's acquire in b's turn: owner %q token %d (after %d)", owner, next, tok)
	}
	if err := s.Release(bg, "u", "b", next+1); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("this version's release of b's grant by a wrong token: %v", err)
	}
	if err := s.Release(bg, "u", "b", next); err != nil { // hands the lock to x
		t.Fatalf("this version's release of b's grant: %v", err)
	}
	if rec := acquire("w"); rec.Held("w") {
		t.Fatalf("w's acquire in x's turn: %+v", rec)
	}
	if owner, last := old.Acquire(t, "u", "x"); owner != "x" || last <= next {
		t.Fatalf("previous version's acquire in x's turn: owner %q token %d (after %d)", owner, last, next)
	}
}
