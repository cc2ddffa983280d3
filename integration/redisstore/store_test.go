package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestTokensIncreaseAcrossEmptyRestart restarts a Redis without persistence
// between grants: every key is gone, yet the next token is larger. The
// restart guard is off, so grants follow the restart at once.
func TestTokensIncreaseAcrossEmptyRestart(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix(), redisstore.WithRestartGuard(false))
	var last uint64
	for round := range 3 {
		for i := range 5 {
			rec := mustHold(t, s, "m", "a")
			if rec.Token <= last {
				t.Fatalf("round %d grant %d: token %d after %d", round, i, rec.Token, last)
			}
			last = rec.Token
			if err := s.Release(bg, "m", "a", rec.Token); err != nil {
				t.Fatal(err)
			}
		}
		if err := srv.Restart(); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		if n, err := c.DBSize(bg).Result(); err != nil || n != 0 {
			t.Fatalf("after restart DBSIZE = %d, %v; want an empty server", n, err)
		}
	}
}

// TestTokenCounterAheadOfClock: a counter above the server's time in µs
// (a burst, or a clock stepped back) keeps counting up.
func TestTokenCounterAheadOfClock(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	tok := mustHold(t, s, "ahead", "a").Token
	if err := s.Release(bg, "ahead", "a", tok); err != nil {
		t.Fatal(err)
	}
	future := tok + uint64(time.Hour/time.Microsecond)
	key := recordKeyOf(srv.KeyPrefix(), "ahead")
	setRecordField(t, c, key, 1, strconv.FormatUint(future, 10))
	if got := mustHold(t, s, "ahead", "b").Token; got != future+1 {
		t.Fatalf("token %d after a counter of %d, want %d", got, future, future+1)
	}
}

// setRecordField sets field i (0-based, see lib.lua's decode) of the
// record under key, keeping its expiry.
func setRecordField(t testing.TB, c *redis.Client, key string, i int, v string) {
	t.Helper()
	raw, err := c.Get(bg, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(raw, "\x00")
	f[i] = v
	if err := c.Set(bg, key, strings.Join(f, "\x00"), redis.KeepTTL).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestOddNamesNeverCollide holds each of a set of names that a careless
// encoding would confuse, each by its own contender, and checks that every
// key of a lock carries the same hash tag.
func TestOddNamesNeverCollide(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	names := []string{"a", "{a}", "{a", "a}", "{", "}", "{}", "}{", ":", "a:b", "a:{b}", "a/b", "a b", "a ", " a",
		"ü", "u\u0308", "日本", "%7B", "YQ", "YQ==", "a\nb", "\x7f", strings.Repeat("x", lease.MaxNameLength),
		strings.Repeat("{", lease.MaxNameLength), strings.Repeat("é", lease.MaxNameLength/2)}
	for i, n := range names {
		mustHold(t, s, n, "c"+string(rune('A'+i)))
	}
	for i, n := range names {
		rec, err := s.Get(bg, n)
		if err != nil || rec.OwnerID != "c"+string(rune('A'+i)) {
			t.Errorf("Get(%q) = %+v, %v; want the owner c%c", n, rec, err, 'A'+i)
		}
	}
	keys, err := c.Keys(bg, srv.KeyPrefix()+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, srv.KeyPrefix())
		open, end := strings.IndexByte(rest, '{'), strings.IndexByte(rest, '}')
		if open != 0 || end < 2 || strings.ContainsAny(rest[end+1:], "{}") {
			t.Errorf("key %q: want <prefix>{tag}:<suffix>", k)
		}
	}
	if len(keys) < 2*len(names) { // record and grant of each
		t.Errorf("%d keys for %d names", len(keys), len(names))
	}
}

// TestBadInput gives typed errors, never a panic.
func TestBadInput(t *testing.T) {
	t.Parallel()
	var nilClient *redis.Client
	for name, c := range map[string]redis.UniversalClient{"nil": nil, "typed nil": nilClient} {
		if _, err := redisstore.New(c); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("New(%s) error %v, want ErrInvalidArgument", name, err)
		}
	}
	srv := sharedRedis(t)
	c := dial(t, srv.Addr())
	wrapped := struct{ *redis.Client }{c} // the Store cannot tell which server owns a key
	if _, err := redisstore.New(wrapped); !errors.Is(err, lease.ErrInvalidArgument) {
		t.Errorf("New(%T) error %v, want ErrInvalidArgument", wrapped, err)
	}
	for name, opt := range map[string]redisstore.Option{
		"prefix with {":    redisstore.WithKeyPrefix("a{b"),
		"prefix with }":    redisstore.WithKeyPrefix("a}"),
		"long prefix":      redisstore.WithKeyPrefix(strings.Repeat("p", 257)),
		"negative handoff": redisstore.WithHandoff(-time.Second),
		"huge handoff":     redisstore.WithHandoff(time.Hour),
		"zero replicas":    redisstore.WithWaitReplicas(0, time.Second),
		"zero wait":        redisstore.WithWaitReplicas(1, 0),
		"short retention":  redisstore.WithRetention(time.Millisecond),
		"long retention":   redisstore.WithRetention(1000 * time.Hour),
	} {
		if _, err := redisstore.New(c, opt); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("New with %s: error %v, want ErrInvalidArgument", name, err)
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": srv.Addr()}})
	defer ring.Close()
	if _, err := redisstore.New(ring, redisstore.WithWaitReplicas(1, time.Second)); !errors.Is(err, lease.ErrInvalidArgument) {
		t.Errorf("WithWaitReplicas on a Ring: error %v, want ErrInvalidArgument", err)
	}
	s, err := redisstore.New(c, nil, redisstore.WithKeyPrefix(srv.KeyPrefix()), redisstore.WithLogger(nil))
	if err != nil {
		t.Fatalf("New with a nil option: %v", err)
	}
	defer s.Close()
	bad := []struct {
		what string
		err  error
		call func() error
	}{
		{"empty name", lease.ErrInvalidName, func() error { _, err := s.Acquire(bg, "", "a", ttl, tr); return err }},
		{"NUL in name", lease.ErrInvalidName, func() error { _, err := s.Get(bg, "a\x00"); return err }},
		{"long name", lease.ErrInvalidName, func() error { _, err := s.Renew(bg, strings.Repeat("n", 256), "a", 1, ttl, tr); return err }},
		{"bad UTF-8", lease.ErrInvalidName, func() error { return s.Release(bg, "\xff", "a", 1) }},
		{"empty contender", lease.ErrInvalidArgument, func() error { _, err := s.Acquire(bg, "m", "", ttl, tr); return err }},
		{"long contender", lease.ErrInvalidArgument, func() error { return s.Release(bg, "m", strings.Repeat("c", 129), 0) }},
		{"zero ttl", lease.ErrInvalidArgument, func() error { _, err := s.Acquire(bg, "m", "a", 0, tr); return err }},
		{"negative transition", lease.ErrInvalidArgument, func() error { _, err := s.Renew(bg, "m", "a", 1, ttl, -1); return err }},
		{"watch bad name", lease.ErrInvalidName, func() error { _, err := s.Watch(bg, "", ""); return err }},
		{"watch bad contender", lease.ErrInvalidArgument, func() error { _, err := s.Watch(bg, "m", "\xff"); return err }},
	}
	for _, b := range bad {
		if err := b.call(); !errors.Is(err, b.err) {
			t.Errorf("%s: error %v, want %v", b.what, err, b.err)
		}
	}
	res, err := s.RenewMany(bg, []lease.RenewRequest{{Name: "", Contender: "a", Token: 1, TTL: ttl}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, lease.ErrInvalidName) {
		t.Errorf("RenewMany of a bad name = %v, %v", res, err)
	}
	rs, err := redisstore.New(ring, redisstore.WithKeyPrefix(srv.KeyPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Watch(bg, "m", ""); !errors.Is(err, redisstore.ErrNoPush) {
		t.Errorf("Watch on a Ring: %v, want ErrNoPush", err)
	}
	mustHold(t, rs, "ring", "a") // scripts work on a Ring
	s.Close()
	if _, err := s.Watch(bg, "m", ""); !errors.Is(err, redisstore.ErrClosed) {
		t.Errorf("Watch after Close: %v, want ErrClosed", err)
	}
}

// TestGarbageUnderOurKeys: foreign values under the Store's keys give an
// error of unknown outcome, never a grant or a panic.
func TestGarbageUnderOurKeys(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	good := mustHold(t, s, "g", "a")
	rec := recordKeyOf(srv.KeyPrefix(), "g")
	raw, err := c.Get(bg, rec).Result()
	if err != nil {
		t.Fatal(err)
	}
	for what, corrupt := range map[string]func() error{
		"token not a number":  func() error { setRecordField(t, c, rec, 3, "x"); return nil },
		"owner without token": func() error { setRecordField(t, c, rec, 3, "0"); return nil },
		"too few fields":      func() error { return c.Set(bg, rec, "s1\x001", time.Minute).Err() },
		"another version":     func() error { setRecordField(t, c, rec, 0, "s9"); return nil },
		"a hash, not a string": func() error {
			return errors.Join(c.Del(bg, rec).Err(), c.HSet(bg, rec, "o", "a").Err())
		},
	} {
		if err := c.Del(bg, rec).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(bg, rec, raw, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := corrupt(); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Acquire(bg, "g", "b", ttl, tr)
		if err == nil && rec.Held("b") {
			t.Errorf("%s: Acquire granted %+v", what, rec)
		}
		if err == nil {
			t.Errorf("%s: Acquire succeeded: %+v", what, rec)
		}
		if _, err := s.Get(bg, "g"); err == nil {
			t.Errorf("%s: Get succeeded", what)
		}
		// A renewal names the grant key, which is intact: it may succeed,
		// but must never report the grant lost.
		if _, err := s.Renew(bg, "g", "a", good.Token, ttl, tr); errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s: Renew error %v, want success or an unknown outcome", what, err)
		}
		if what != "a hash, not a string" {
			if _, err := s.Get(bg, "g"); !errors.Is(err, redisstore.ErrUnexpectedReply) {
				t.Errorf("%s: Get error %v, want ErrUnexpectedReply", what, err)
			}
		}
	}
}

// TestACLWithoutScripting: a client whose ACL user may not run scripts gets
// lease.ErrStoreSetup, so a blocking Acquire fails at once.
func TestACLWithoutScripting(t *testing.T) {
	t.Parallel()
	srv := testserver.Redis(t)
	admin := dial(t, srv.Addr())
	user := "simba-noscript-" + strings.ReplaceAll(t.Name(), "/", "-")
	if err := admin.Do(bg, "ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() { admin.Do(bg, "ACL", "DELUSER", user) })
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, srv.KeyPrefix())
	if _, err := s.Acquire(bg, "m", "a", ttl, tr); !errors.Is(err, lease.ErrStoreSetup) {
		t.Fatalf("Acquire = %v, want ErrStoreSetup", err)
	}
	m, err := lease.NewManager(s, lease.WithContenderID("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if _, err := m.Acquire(ctx, "m"); !errors.Is(err, lease.ErrStoreSetup) || ctx.Err() != nil {
		t.Errorf("Manager.Acquire = %v (context: %v), want ErrStoreSetup at once", err, ctx.Err())
	}
}

// TestScriptFlushReloads: SCRIPT FLUSH on a server that has been up for a
// while costs a reload, not a hold-back: the next Acquire is granted at
// once.
func TestScriptFlushReloads(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	tok := mustHold(t, s, "f", "a").Token
	if err := s.Release(bg, "f", "a", tok); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(bg).Err(); err != nil {
		t.Fatal(err)
	}
	if got := mustHold(t, s, "f", "b").Token; got <= tok {
		t.Fatalf("token %d after %d", got, tok)
	}
	if err := c.ScriptFlush(bg).Err(); err != nil {
		t.Fatal(err)
	}
	mustHold(t, s, "fresh", "b") // a name without a record, too
}
