package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestUncontendedCycleCost: an uncontended acquire and release through a
// Manager costs the server at most 6 commands (each script and every
// command it runs; the release is one GETDEL), with no INFO, on a lock
// used before, and 7 on fresh names.
func TestUncontendedCycleCost(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	direct := dial(t, srv.Addr())
	m := manager(t, newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()))
	cycle := func(name string) {
		l, err := m.Acquire(bg, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	cycle("warm") // the Store's first contact: INFO and SCRIPT LOAD
	const n = 100
	for _, c := range []struct {
		what string
		name func(i int) string
		max  float64
	}{
		{"one mutex", func(int) string { return "one" }, 6},
		{"fresh names", func(i int) string { return fmt.Sprintf("fresh/%d", i) }, 7},
	} {
		before, infos := serverOps(t, direct)
		for i := range n {
			cycle(c.name(i))
		}
		after, infosAfter := serverOps(t, direct)
		per := float64(after-before-1) / n
		t.Logf("%s: %.2f commands per cycle", c.what, per)
		if per > c.max {
			t.Errorf("%s: %.2f server commands per uncontended cycle, want at most %v", c.what, per, c.max)
		}
		if d := infosAfter - infos - 1; d > 0 {
			t.Errorf("%s: %d INFO in %d cycles, want none", c.what, d, n)
		}
	}
}

// TestUncontendedCycleAllocs: an uncontended acquire and release of a
// Store send at most 14 words in their two round trips (a script call is
// EVALSHA, the SHA, the number of keys, then the keys and arguments: the
// record key, and the epoch key of its slot, the contender, the durations
// or the token; the Store's constants are in its scripts' text) and cost
// the client at most maxCycleAllocs allocations.
func TestUncontendedCycleAllocs(t *testing.T) {
	srv := privateRedis(t)
	cycle := func(s *redisstore.Store) {
		tok := mustHold(t, s, "cycle", "a").Token
		if err := s.Release(bg, "cycle", "a", tok); err != nil {
			t.Fatal(err)
		}
	}
	n := &counter{}
	c := dial(t, srv.Addr())
	c.AddHook(n)
	counted := newStore(t, c, srv.KeyPrefix())
	cycle(counted) // the Store's first contact: INFO and SCRIPT LOAD
	n.reset()
	cycle(counted)
	if _, _, trips := n.get(); trips != 2 {
		t.Fatalf("%d round trips in an uncontended acquire and release, want 2", trips)
	}
	got := n.words()
	t.Logf("%d words sent", got)
	if got > 14 {
		t.Errorf("%d arguments of the scripts of an uncontended acquire and release, want at most 14", got)
	}
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()) // no hook
	cycle(s)
	a := testing.AllocsPerRun(200, func() { cycle(s) })
	t.Logf("%.1f allocations per cycle", a)
	if a > maxCycleAllocs {
		t.Errorf("%.1f allocations per uncontended acquire and release, want at most %d", a, maxCycleAllocs)
	}
}

// maxCycleAllocs bounds the client's allocations per uncontended acquire
// and release of a Store (TestUncontendedCycleAllocs): 18 measured (36
// before the scripts took only what changes, 19 while the acquire's
// token was boxed to be parsed), one more in reserve because
// testing.AllocsPerRun also counts what go-redis's own goroutines allocate
// meanwhile.
const maxCycleAllocs = 19

// TestManagerCycleAllocs (issue 17): an uncontended Acquire and Release
// through a Manager allocate at most maxManagerAllocs more than the
// Store's own cycle, under context.Background and under a context that
// can end, as a request's.
func TestManagerCycleAllocs(t *testing.T) {
	srv := privateRedis(t)
	m := manager(t, newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()))
	cancelable, cancel := context.WithCancel(bg)
	defer cancel()
	for _, c := range []struct {
		what string
		ctx  context.Context
		max  int
	}{{"context.Background", bg, maxManagerAllocs}, {"a context that can end", cancelable, maxManagerAllocsCancelable}} {
		cycle := func() {
			l, err := m.Acquire(c.ctx, "cycle")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(c.ctx); err != nil {
				t.Fatal(err)
			}
		}
		cycle()
		a := testing.AllocsPerRun(200, cycle)
		t.Logf("under %s: %.1f allocations per cycle", c.what, a)
		if a > float64(maxCycleAllocs+c.max) {
			t.Errorf("under %s: %.1f allocations per uncontended Manager cycle, want at most %d", c.what, a, maxCycleAllocs+c.max)
		}
	}
}

// What a Manager adds to the Store's allocations per uncontended cycle
// (TestManagerCycleAllocs): the slot (with the lease and the contexts of
// its two store calls) and the channel of each call's context, which go-redis
// asks for; under a context that can end, each call's watch on it
// (context.AfterFunc) too. It was 27 and 43 allocations in all (the
// lease's context and cancel function, one context per call, and the
// release's guard against the lease's context, not made now until asked
// for).
const (
	maxManagerAllocs           = 3
	maxManagerAllocsCancelable = 9
)

// TestRenewalCost: renewing grants the Store made costs one command each
// (a PEXPIRE of the grant key, no script), plus one TIME per call (the
// server's clock, for the lease's clock step detector).
func TestRenewalCost(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	direct := dial(t, srv.Addr())
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	var reqs []lease.RenewRequest
	for i := range 50 {
		m := fmt.Sprintf("held/%d", i)
		reqs = append(reqs, lease.RenewRequest{Name: m, Contender: "a", Token: mustHold(t, s, m, "a").Token, TTL: ttl, Transition: tr})
	}
	before, _ := serverOps(t, direct)
	res, err := s.RenewMany(bg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := serverOps(t, direct)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("renewal %d: %v", i, r.Err)
		}
	}
	if d := after - before - 1; d > int64(len(reqs))+1 {
		t.Errorf("%d server commands to renew %d grants, want one each and a TIME", d, len(reqs))
	}
	for i, r := range res {
		if r.Record.ServerTime.IsZero() {
			t.Fatalf("renewal %d reports no server time", i)
		}
	}
}

// retention is redisstore.DefaultRetention, the promise of
// TestFreeMutexLeavesOneKey.
const retention = 10 * time.Minute

// TestFreeMutexLeavesOneKey: a name locked once and released leaves one
// key behind, which expires within the retention, so a service that
// locks one name per order keeps a bounded number of keys.
func TestFreeMutexLeavesOneKey(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	direct := dial(t, srv.Addr())
	m := manager(t, newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()))
	const n = 20
	for i := range n {
		l, err := m.Acquire(bg, fmt.Sprintf("orders/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := direct.Keys(bg, srv.KeyPrefix()+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	perName := 0
	for _, k := range keys {
		d, err := direct.PTTL(bg, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d == -1 { // the epoch key of the server (see keys.go)
			continue
		}
		perName++
		if d > retention {
			t.Errorf("key %q expires in %v, want at most %v", k, d, retention)
		}
	}
	if perName != n {
		t.Errorf("%d keys for %d free names (%v), want one each", perName, n, keys)
	}
}

// TestAcquireSendsExpiries: an acquire sends the expiries its grant
// writes, in ms, ready-made (the grant key's, ttl + transition, and the
// record's, the larger of the retention and that), so that the acquire
// script's fast path converts no duration between string and number
// (tonumber and string.format were a quarter of its Lua work). The keys
// get those expiries, on a lock used before (the fast path's first
// branch) and on a fresh one (its second), with the retention the longer
// and the shorter (the restart guard off: it would hold the fresh lock of
// the longer span back on a server this young). The last argument is the
// token floor (see TestTokenFloorOnlyRaises), at least every token the
// process was granted before.
func TestAcquireSendsExpiries(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	direct := dial(t, srv.Addr())
	const keep = 2 * time.Second
	n := &counter{}
	c := dial(t, srv.Addr())
	c.AddHook(n)
	s := newStore(t, c, srv.KeyPrefix(), redisstore.WithRetention(keep), redisstore.WithRestartGuard(false))
	var seen uint64
	for _, x := range []struct {
		name          string
		ttl, tr, span time.Duration
		record        time.Duration
	}{
		{"short", 500 * time.Millisecond, 300 * time.Millisecond, 800 * time.Millisecond, keep},
		{"long", 2 * time.Second, time.Second, 3 * time.Second, 3 * time.Second},
	} {
		for _, round := range []string{"fresh", "used"} {
			rec, err := s.Acquire(bg, x.name, "a", x.ttl, x.tr)
			if err != nil || !rec.Held("a") {
				t.Fatalf("%s, %s: Acquire: %+v, %v", x.name, round, rec, err)
			}
			a := n.lastScript()
			if len(a) != 10 {
				t.Fatalf("%s, %s: acquire sent %v, want 10 words", x.name, round, a)
			}
			got := fmt.Sprint(a[5:9])
			want := fmt.Sprint([]any{"a", x.span.Milliseconds(), x.tr.Milliseconds(), x.record.Milliseconds()})
			if got != want {
				t.Errorf("%s, %s: acquire sent %v, want its arguments %s (contender, span, transition, the record's expiry) then the token floor", x.name, round, a, want)
			}
			if f, err := strconv.ParseUint(fmt.Sprint(a[9]), 10, 64); err != nil || f < seen {
				t.Errorf("%s, %s: acquire sent the token floor %v, want at least %d (the latest token before)", x.name, round, a[9], seen)
			}
			seen = rec.Token
			rk := recordKeyOf(srv.KeyPrefix(), x.name)
			gk := strings.TrimSuffix(rk, ":r") + ":g:" + strconv.FormatUint(rec.Token, 10) + ":a"
			for _, k := range []struct {
				key string
				exp time.Duration
			}{{gk, x.span}, {rk, x.record}} {
				d, err := direct.PTTL(bg, k.key).Result()
				if err != nil || d > k.exp || d < k.exp-time.Second {
					t.Errorf("%s, %s: PTTL %s = %v, %v; want about %v", x.name, round, k.key, d, err, k.exp)
				}
			}
			if err := s.Release(bg, x.name, "a", rec.Token); err != nil {
				t.Fatal(err)
			}
		}
	}
}
