package redisstore_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/redisstore"
)

// TestTokenFloorAfterClockStepAndFlush (I1; the campaign's -5.56 s step
// then FLUSHALL): the server's clock steps back an hour and FLUSHALL wipes
// the lock's counter, so the server's clock alone would restart its tokens
// an hour of µs below those already issued. Every later grant of the lock
// to this process carries a larger token: through a second Store that
// never saw them, and through the Manager that did after another process,
// which never saw them either, made the lock's new record. The restart
// guard is off: after the step it would hold every new record back until
// the server's clock is again past the script's START, an hour.
func TestTokenFloorAfterClockStepAndFlush(t *testing.T) {
	t.Parallel()
	clk := testserver.NewServerClock(t)
	srv := testserver.PrivateRedis(t, testserver.RedisServerClock(clk))
	c := dial(t, srv.Addr())
	m := manager(t, newStore(t, c, srv.KeyPrefix(), redisstore.WithRestartGuard(false)))
	n := &counter{}
	oc := dial(t, srv.Addr())
	oc.AddHook(n)
	other := newStore(t, oc, srv.KeyPrefix(), redisstore.WithRestartGuard(false))
	if err := other.Release(bg, "warm", "b", mustHold(t, other, "warm", "b").Token); err != nil {
		t.Fatal(err)
	}
	acquireCall := n.lastScript()
	var high uint64
	take := func(what string, tok uint64) {
		t.Helper()
		if tok <= high {
			t.Fatalf("%s: token %d, want above %d (issued before the step and the flush)", what, tok, high)
		}
		high = tok
	}
	for i := range 3 {
		l, err := m.Acquire(bg, "m")
		if err != nil {
			t.Fatal(err)
		}
		take(fmt.Sprintf("grant %d", i), l.Token())
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	if err := clk.Step(-time.Hour); err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		if err := c.FlushAll(bg).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	rec := mustHold(t, other, "m", "b")
	take("another Store after the step and FLUSHALL", rec.Token)
	// A Store made after the step works too, though the server, whose
	// clock is now behind its start, reports a negative uptime.
	late := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithRestartGuard(false))
	if err := late.Release(bg, "late", "c", mustHold(t, late, "late", "c").Token); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(bg, "m", "b", rec.Token); err != nil {
		t.Fatal(err)
	}
	flush()
	// A process that never saw the tokens (floor 0) makes the new record:
	// its token comes from the clock, below them (the gap left).
	tok := replayAcquire(t, c, acquireCall, recordKeyOf(srv.KeyPrefix(), "m"), "z", 0)
	t.Logf("a process without a floor: token %d after %d", tok, high)
	if err := other.Release(bg, "m", "z", tok); err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(bg, "m")
	if err != nil {
		t.Fatal(err)
	}
	take("the Manager after a second FLUSHALL", l.Token())
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
}

// replayAcquire runs the acquire script call a (as a counter recorded it:
// evalsha, SHA, 2, record key, epoch key, contender, span, transition,
// the record's expiry, floor) for the record key rk and contender with
// floor, and returns the token granted.
func replayAcquire(t testing.TB, c *redis.Client, a []any, rk, contender string, floor uint64) uint64 {
	t.Helper()
	if len(a) < 9 || a[0] != "evalsha" {
		t.Fatalf("not an acquire call: %v", a)
	}
	v, err := c.Do(bg, "evalsha", a[1], 2, rk, a[4], contender, a[6], a[7], a[8], strconv.FormatUint(floor, 10)).Result()
	if err != nil {
		t.Fatalf("acquire %s: %v", rk, err)
	}
	if l, ok := v.([]any); ok && len(l) == 4 && l[0] == contender {
		v = l[1] // the full script's record
	}
	s, _ := v.(string)
	tok, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("acquire %s: reply %v, want a grant", rk, v)
	}
	return tok
}

// TestTokenFloorOnlyRaises replays the Store's acquire script with floors
// of its own, on a lock without a record (the fast path), on one with an
// observer's stub (the full script adopts it) and then on the record that
// made: a floor below the counter (or the server's clock, for a new or
// adopted record) leaves the token to it, one above starts the token just
// above the floor.
func TestTokenFloorOnlyRaises(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	n := &counter{}
	c := dial(t, srv.Addr())
	c.AddHook(n)
	s := newStore(t, c, srv.KeyPrefix(), redisstore.WithRestartGuard(false))
	mustHold(t, s, "seen", "a")
	call := n.lastScript()
	direct := dial(t, srv.Addr())
	serverUS := func() uint64 {
		t.Helper()
		now, err := direct.Time(bg).Result()
		if err != nil {
			t.Fatal(err)
		}
		return uint64(now.UnixMicro())
	}
	hour := uint64(time.Hour / time.Microsecond)
	for _, path := range []struct {
		what string
		make func(rk string)
	}{
		{"no record", func(string) {}},
		{"a stub", func(rk string) { // as observe.lua makes it
			if err := direct.Set(bg, rk, "s1\x000\x00\x000\x00\x000\x00o\x000\x00", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		acquire := func(rk string, floor uint64) uint64 {
			t.Helper()
			return replayAcquire(t, direct, call, rk, "x", floor)
		}
		rk := recordKeyOf(srv.KeyPrefix(), "low/"+path.what)
		path.make(rk)
		before := serverUS()
		got := acquire(rk, 1)
		after := serverUS()
		if got <= before || got > after+1 {
			t.Errorf("%s, floor 1: token %d, want the server's clock in µs plus one (%d to %d)", path.what, got, before+1, after+1)
		}
		rk = recordKeyOf(srv.KeyPrefix(), "high/"+path.what)
		path.make(rk)
		floor := serverUS() + hour
		for _, x := range []struct {
			what        string
			floor, want uint64
		}{
			{"a floor an hour ahead of the clock", floor, floor + 1},
			{"then floor 1 on that record", 1, floor + 2},
			{"then a floor above that record's counter", floor + hour, floor + hour + 1},
		} {
			if got := acquire(rk, x.floor); got != x.want {
				t.Errorf("%s, %s: token %d, want %d", path.what, x.what, got, x.want)
			}
			if err := direct.Del(bg, grantKeyOf(t, direct, srv.KeyPrefix(), x.want)).Err(); err != nil {
				t.Fatal(err) // the grant ends: the next acquire makes a new one
			}
		}
	}
}
