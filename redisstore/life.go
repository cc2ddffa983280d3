package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Server lives. A Redis server that restarts, even from a snapshot or an
// AOF that kept the fencing counters, may have lost its latest writes: a
// grant, whose holder still believes it holds the lock. The acquire
// script must know when the data it sees began its current life, but
// asking the server (INFO) on every call would cost a command per
// operation.
//
// The script cache answers it for free: it is empty after every restart
// (and on a promoted replica: Redis 7 replicates a script's effects, not
// SCRIPT LOAD), and a flush keeps it. So the Store loads, into each server
// it talks to, an acquire script made for that server's life: its text
// names the life (the start of run_id) and the latest instant the life
// can have begun (server time less uptime, plus a second for rounding), so
// its SHA exists on that server during that life only. EVALSHA of it costs
// nothing extra; NOSCRIPT means a new life (or a SCRIPT FLUSH, or a slot
// that moved to another server), and the Store asks INFO and loads the
// script anew. INFO and SCRIPT LOAD go over one connection, which a
// restart in between breaks (it is never dialed again), so a script can
// never be loaded into a life other than the one it names. There is no
// EVAL fallback for this script.

// node is what the Store knows of one server: the acquire script loaded
// into its current life.
type node struct {
	mu  sync.Mutex             // serializes loads
	sha atomic.Pointer[loaded] // nil until loaded
}

// loaded is the SHA of an acquire script loaded into a server, and the
// same boxed once for the calls.
type loaded struct {
	sha string
	box any
}

// nodes are the servers the Store talks to, by address ("" for the one
// server of a *redis.Client).
type nodes struct {
	mu sync.Mutex
	m  map[string]*node
}

func (ns *nodes) get(addr string) *node {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.m == nil {
		ns.m = map[string]*node{}
	}
	n := ns.m[addr]
	if n == nil {
		n = &node{}
		ns.m[addr] = n
	}
	return n
}

// serverOf returns the client of the server that owns key (the master of
// its slot on Redis Cluster, its shard on a Ring) and its address.
func (s *Store) serverOf(ctx context.Context, key string) (*redis.Client, string, error) {
	switch {
	case s.cluster != nil:
		c, err := s.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, "", err
		}
		return c, c.Options().Addr, nil
	case s.ring != nil:
		c, err := s.ring.GetShardClientForKey(key)
		if err != nil {
			return nil, "", err
		}
		return c, c.Options().Addr, nil
	}
	return s.single, "", nil
}

// acquireSHA returns the SHA of the acquire script loaded into the
// current life of the server at addr, loading it when the Store has none
// or when stale (the SHA the server did not know) is still current.
func (s *Store) acquireSHA(ctx context.Context, c *redis.Client, addr, stale string) (*loaded, error) {
	n := s.nodes.get(addr)
	if p := n.sha.Load(); p != nil && p.sha != stale {
		return p, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.sha.Load(); p != nil && p.sha != stale {
		return p, nil
	}
	sha, err := s.loadAcquire(ctx, c)
	if err != nil {
		return nil, err
	}
	p := &loaded{sha: sha, box: sha}
	n.sha.Store(p)
	return p, nil
}

// loadAcquire asks the server at c for its life and loads the acquire
// script made for it, both over one connection (see pinned).
func (s *Store) loadAcquire(ctx context.Context, c *redis.Client) (string, error) {
	conn, done := pinned(c)
	defer done()
	info, err := conn.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	l, err := parseLife(info)
	if err != nil {
		return "", err
	}
	if l.nowUS == 0 { // before Redis 6.2: INFO has no server_time_usec
		t, err := conn.Time(ctx).Result()
		if err != nil {
			return "", err
		}
		l.nowUS = t.UnixMicro()
	}
	// uptime_in_seconds is the cached unix time in seconds (the one
	// server_time_usec shows) less the start's, rounded down: the life
	// began less than a second after this. The same every time it is
	// asked, so every Store makes the same text for one life.
	start := (l.nowUS/1_000_000 - l.uptime + 1) * 1000
	return conn.ScriptLoad(ctx, acquireText(l.runID, start, !s.cfg.noGuard, s.consts)).Result()
}

// pinned returns one connection to the server of c: a client of the
// Store's own with c's options (address, dialer, credentials, TLS) and one
// connection, pinned (a broken connection is never dialed again), and a
// function that closes it. Not c.Conn(): go-redis v9.22 lets a Conn and its
// client race on the shared options when they set up connections at once.
func pinned(c *redis.Client) (*redis.Conn, func()) {
	o := *c.Options()
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = 1, 0, 1, 1
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	o.PushNotificationProcessor = nil
	o.ClientSideCacheConfig, o.ClientSideCache = nil, nil
	own := redis.NewClient(&o)
	conn := own.Conn()
	return conn, func() {
		_ = conn.Close()
		_ = own.Close()
	}
}

// acquireText is the acquire script for the life runID begun at the
// latest at start (server ms), with a Store's consts. FAST is the pattern
// of acquirefast.lua: a record of this life (runID is hex) without flags,
// hold or reserved waiter; it captures the counter, the last token and
// its owner.
func acquireText(runID string, start int64, guard bool, consts string) string {
	return fmt.Sprintf("local LIFE, START, GUARD = '%s', %d, %t\n", runID, start, guard) +
		"local FAST = '^s1%z(%d+)%z" + runID + "%z(%d+)%z([^%z]*)%z%d+%z%z0%z$'\n" +
		consts + acquireFastLua + libLua + acquireLua
}

// life is what INFO server says of a server's life.
type life struct {
	runID  string // its first 16 characters
	uptime int64  // seconds
	nowUS  int64  // server_time_usec, 0 when absent
}

// parseLife reads run_id, uptime_in_seconds and server_time_usec.
func parseLife(info string) (life, error) {
	var l life
	up := false
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			if len(v) >= 16 && strings.Trim(v, "0123456789abcdef") == "" {
				l.runID = v[:16]
			}
		case "uptime_in_seconds":
			// Negative once the server's clock stepped back past its
			// start: the start then lies ahead of the server's now, and
			// the restart guard holds new records back until the clock
			// is past it again, as it does for a Store that loaded its
			// script before the step. Refusing it instead would leave
			// every new Store unable to acquire.
			n, err := strconv.ParseInt(v, 10, 64)
			up = err == nil
			l.uptime = n
		case "server_time_usec":
			l.nowUS, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if l.runID == "" || !up {
		return life{}, fmt.Errorf("%w: INFO server without run_id or uptime_in_seconds", ErrUnexpectedReply)
	}
	return l, nil
}

// isNoScript reports whether err is the server's NOSCRIPT: nothing ran.
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// errNoScript: the acquire script kept being unknown (a slot moving
// between servers while the Store loaded it). Nothing ran.
var errNoScript = errors.New("redisstore: acquire script not loaded in time (slot moving?)")
