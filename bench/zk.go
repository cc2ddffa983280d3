package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

const (
	// defaultZKSession is the session timeout when Servers.ZKSessionS is 0.
	defaultZKSession = 4 * time.Second
	// zkRecipeRoot is the parent of the lock recipe's lock znodes.
	zkRecipeRoot = "/simba-bench-zk-lock"
	// zkConnectWait bounds the wait for a session in Open.
	zkConnectWait = 20 * time.Second
	// zkWarmRoot is the parent of the nodes the warm-up makes.
	zkWarmRoot = "/simba-bench-zk-warm"
	// zkWarmFor is how long the warm-up exercises the server, and
	// zkWarmConns with how many sessions at once. ZooKeeper's JVM
	// compiles its hot paths in the first seconds of load: unwarmed, the
	// target measured first paid for it (scenario (a), -only zookeeper,
	// simba first: simba 1,014 pairs/s, acquire p99 3.23 ms, the recipe
	// 1,181 and 1.24 ms; the recipe first, twice: simba 1,863 and 1,817
	// pairs/s, p99 465 and 513 µs, the recipe 1,437 and 1,412, p99 1.93
	// and 2.01 ms).
	zkWarmFor   = 3 * time.Second
	zkWarmConns = 4
)

// zkTargets returns simba and go-zookeeper's lock recipe on the ZooKeeper
// of s, if any.
func zkTargets(s Servers) []Target {
	if s.ZooKeeper == "" {
		return nil
	}
	session := defaultZKSession
	if s.ZKSessionS > 0 {
		session = time.Duration(s.ZKSessionS) * time.Second
	}
	servers := strings.Split(s.ZooKeeper, ",")
	ops := zkOps(servers)
	var warmed sync.Once // one warm-up of the server, whichever target asks first
	warm := func(ctx context.Context) (err error) {
		warmed.Do(func() { err = zkWarm(ctx, servers, session) })
		return err
	}
	simba := Target{Lib: "simba", Backend: "ZooKeeper",
		Settings: fmt.Sprintf("session timeout %v; store.LeaseOptions (ttl + transition = session timeout, 5:3); leases live with the session (renewals send nothing); watch on the predecessor; %s", session, zkWarmed),
		Open: func(ctx context.Context) (Client, error) {
			ctx, cancel := context.WithTimeout(ctx, zkConnectWait)
			defer cancel()
			sess, err := zkstore.Connect(ctx, servers, session, zkstore.WithConnOptions(zk.WithLogInfo(false), zk.WithLogger(quietZK{})))
			if err != nil {
				return nil, fmt.Errorf("simba/zookeeper: %w", err)
			}
			store, err := zkstore.New(sess)
			if err != nil {
				sess.Close()
				return nil, fmt.Errorf("simba/zookeeper: store: %w", err)
			}
			m, err := lease.NewManager(store, append(store.LeaseOptions(), lease.WithContenderID(contenderID()))...)
			if err != nil {
				sess.Close()
				return nil, fmt.Errorf("simba/zookeeper: manager: %w", err)
			}
			return prefixed{&simbaClient{m: m, closers: []func() error{func() error { sess.Close(); return nil }}},
				s.KeyPrefix, nameMax}, nil
		},
		Ops: ops, Takeover: session, Warm: warm}
	recipe := Target{Lib: "zk lock recipe", Backend: "ZooKeeper",
		Settings: fmt.Sprintf("session timeout %v (kept alive by the conn's pings every timeout/3); zk.NewLock: ephemeral sequential node, watch on the predecessor; no context (an abandoned wait stays queued, and gives the lock back when its turn comes); %s", session, zkWarmed),
		Open: func(ctx context.Context) (Client, error) {
			conn, err := zkConnect(ctx, servers, session)
			if err != nil {
				return nil, fmt.Errorf("zk lock recipe: %w", err)
			}
			return &zkRecipeClient{conn: conn, prefix: s.KeyPrefix}, nil
		},
		Ops: ops, Takeover: session, Warm: warm}
	return []Target{simba, recipe}
}

// zkWarmed states the warm-up in both targets' Settings.
var zkWarmed = fmt.Sprintf("the server warmed up for %v before the first scenario", zkWarmFor)

// zkWarm exercises the server for zkWarmFor before the first scenario,
// with the requests both targets send (create an ephemeral sequential
// node, list, read and watch it, sync, delete), from zkWarmConns sessions
// at once.
func zkWarm(ctx context.Context, servers []string, session time.Duration) error {
	conn, err := zkConnect(ctx, servers, session)
	if err != nil {
		return fmt.Errorf("zookeeper warm-up: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Create(zkWarmRoot, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zookeeper warm-up: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, zkWarmFor)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, zkWarmConns)
	for i := range zkWarmConns {
		wg.Go(func() {
			c, err := zkConnect(ctx, servers, session)
			if err != nil {
				if ctx.Err() == nil {
					errs[i] = err
				}
				return
			}
			defer c.Close()
			for ctx.Err() == nil {
				if errs[i] = zkWarmCycle(c); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("zookeeper warm-up: %w", err)
	}
	return nil
}

// zkWarmCycle is one round of the warm-up's requests.
func zkWarmCycle(c *zk.Conn) error {
	p, err := c.Create(zkWarmRoot+"/w-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		return err
	}
	if _, _, err := c.Children(zkWarmRoot); err != nil {
		return err
	}
	if _, _, _, err := c.GetW(p); err != nil {
		return err
	}
	if _, _, _, err := c.ExistsW(p); err != nil {
		return err
	}
	if _, err := c.Sync(zkWarmRoot); err != nil {
		return err
	}
	return c.Delete(p, -1)
}

// quietZK silences go-zookeeper's logger.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// zkConnect opens a conn with a session of its own and waits until the
// session is established; its events are drained until it closes.
func zkConnect(ctx context.Context, servers []string, session time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(servers, session, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	timeout := time.NewTimer(zkConnectWait)
	defer timeout.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn, nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("connect: %w", context.Cause(ctx))
		case <-timeout.C:
			conn.Close()
			return nil, fmt.Errorf("connect: no session with %v after %v", servers, zkConnectWait)
		}
	}
}

// zkRecipeClient takes go-zookeeper recipe locks on one conn (one session).
type zkRecipeClient struct {
	conn   *zk.Conn
	prefix string
	wg     sync.WaitGroup // Lock calls still running after their ctx ended
}

// zkLockPath returns the recipe's znode for key: one child of zkRecipeRoot,
// with every byte other than [A-Za-z0-9_-] percent-escaped, so any key is
// a valid name and "." or ".." never occur.
func zkLockPath(prefix, key string) string {
	const hex = "0123456789ABCDEF"
	n := prefix + key
	var b strings.Builder
	b.WriteString(zkRecipeRoot + "/")
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// Lock implements Client. zk.Lock takes no context: it runs in a goroutine,
// and when ctx ends first the goroutine is left to finish; if it gets the
// lock after all it unlocks at once. Close ends it by closing the conn.
func (c *zkRecipeClient) Lock(ctx context.Context, key string) (Lock, error) {
	l := zk.NewLock(c.conn, zkLockPath(c.prefix, key), zk.WorldACL(zk.PermAll))
	res := make(chan error)
	abandon := make(chan struct{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := l.Lock()
		select {
		case res <- err:
		case <-abandon:
			if err == nil {
				_ = l.Unlock()
			}
		}
	}()
	select {
	case err := <-res:
		if err != nil {
			return nil, fmt.Errorf("zk lock recipe: lock: %w", err)
		}
		return zkRecipeLock{l}, nil
	case <-ctx.Done():
		close(abandon)
		return nil, fmt.Errorf("zk lock recipe: lock: %w", context.Cause(ctx))
	}
}

// Close implements Client: closing the conn ends its session, which deletes
// the lock nodes still held or queued, and fails the waits still running.
func (c *zkRecipeClient) Close() error {
	c.conn.Close()
	c.wg.Wait()
	return nil
}

type zkRecipeLock struct{ l *zk.Lock }

// Unlock implements Lock: it deletes the lock node.
func (l zkRecipeLock) Unlock(context.Context) error {
	if err := l.l.Unlock(); err != nil {
		return fmt.Errorf("zk lock recipe: unlock: %w", err)
	}
	return nil
}

// zkOps sums the packets received (requests and pings, the four-letter word
// srvr's "Received:") by every server, less its own: each srvr counts
// itself as one.
func zkOps(servers []string) func(ctx context.Context) (int64, error) {
	var mu sync.Mutex
	var own int64 // srvr commands sent so far
	return func(ctx context.Context) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		var total int64
		for _, s := range servers {
			n, err := zkReceived(ctx, s)
			if err != nil {
				return 0, err
			}
			own++
			total += n
		}
		return total - own, nil
	}
}

// zkReceived asks server for srvr, always whitelisted, and returns its
// "Received:" count.
func zkReceived(ctx context.Context, server string) (int64, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return 0, fmt.Errorf("zookeeper ops: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return 0, fmt.Errorf("zookeeper ops: srvr: %w", err)
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Received:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("zookeeper ops: srvr: %q: %w", sc.Text(), err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("zookeeper ops: srvr: %w", err)
	}
	return 0, errors.New("zookeeper ops: srvr: no Received line (is srvr whitelisted?)")
}
