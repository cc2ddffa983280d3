package zkstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// ErrNoSession: the Session has no session that the server could not have
// expired yet — none was established, the last one expired, or no
// heartbeat was answered for the session timeout (a partition, or a
// server that lost its leader). Calls fail with it until the conn has a
// session again; a holder's lease has ended by then.
var ErrNoSession = errors.New("zkstore: no live ZooKeeper session")

// Session is a ZooKeeper session opened by [Connect]: a *zk.Conn whose
// traffic this package reads, so that it knows for certain the session
// timeout the server granted and until when the session surely lives.
//
// go-zookeeper keeps a session alive with pings every third of the
// timeout. On a Session's conn each ping is sent as a sync of "/" under
// the ping's xid: a server answers it only after hearing from the leader
// that expires sessions, while a follower cut off from its leader still
// answers pings. go-zookeeper ignores both replies alike. The session
// surely lives for the timeout after the heartbeat before the last one
// answered: the leader learns of a heartbeat through the follower's next
// report, which the answer to the following one proves it received.
//
// The caller owns the Session and closes it, after the Managers using it.
type Session struct {
	conn *zk.Conn
	tap  *tap
}

// A ConnectOption configures [Connect].
type ConnectOption func(*connectConfig) error

type connectConfig struct {
	dialer zk.Dialer
	conn   []func(*zk.Conn)
}

// WithDialer makes the conn dial servers with d (default
// net.DialTimeout), for example through a proxy. Use it instead of
// zk.WithDialer, which Connect overrides.
func WithDialer(d zk.Dialer) ConnectOption {
	return func(c *connectConfig) error {
		if d == nil {
			return fmt.Errorf("%w: zkstore: nil dialer", lease.ErrInvalidArgument)
		}
		c.dialer = d
		return nil
	}
}

// WithConnOptions passes go-zookeeper's options to zk.Connect, for
// example zk.WithLogger, zk.WithLogInfo or zk.WithEventCallback, but not
// zk.WithDialer (see [WithDialer]) or zk.WithHostProvider, which Connect
// overrides.
func WithConnOptions(opts ...func(*zk.Conn)) ConnectOption {
	return func(c *connectConfig) error {
		for _, o := range opts {
			if o == nil {
				return fmt.Errorf("%w: zkstore: nil conn option", lease.ErrInvalidArgument)
			}
		}
		c.conn = append(c.conn, opts...)
		return nil
	}
}

// Connect opens a ZooKeeper session with servers ("host:port"), asking for
// timeout as the session timeout, and waits until it is established or
// ctx ends. The server may grant a shorter or longer timeout (it clamps
// the request into its minSessionTimeout and maxSessionTimeout);
// [Session.Timeout] tells which. Like zk.Connect, the conn reconnects by
// itself and renews or replaces its session.
func Connect(ctx context.Context, servers []string, timeout time.Duration, opts ...ConnectOption) (*Session, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: zkstore: no servers", lease.ErrInvalidArgument)
	}
	if timeout < time.Millisecond || timeout > time.Duration(1<<31-1)*time.Millisecond {
		return nil, fmt.Errorf("%w: zkstore: session timeout %v", lease.ErrInvalidArgument, timeout)
	}
	cfg := connectConfig{dialer: net.DialTimeout}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: zkstore: nil ConnectOption", lease.ErrInvalidArgument)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	t := newTap()
	hp := &hostProvider{inner: zk.NewDNSHostProvider()}
	// The event channel is left alone: go-zookeeper drops events it cannot
	// deliver; zk.WithEventCallback sees them all.
	conn, _, err := zk.Connect(servers, timeout, func(c *zk.Conn) {
		for _, o := range cfg.conn {
			o(c)
		}
	}, zk.WithDialer(dialer(cfg.dialer, t, hp)), zk.WithHostProvider(hp))
	if err != nil {
		return nil, fmt.Errorf("zkstore: connect: %w", err)
	}
	select {
	case <-t.ready:
		return &Session{conn: conn, tap: t}, nil
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("zkstore: no session with %v: %w", servers, context.Cause(ctx))
	}
}

// Conn returns the session's conn, for the application's own requests.
// Closing it ends the Session.
func (s *Session) Conn() *zk.Conn { return s.conn }

// Timeout returns the session timeout the server granted the current
// session: the server expires it once it has heard nothing from the
// client for that long. It is 0 while the conn has no session.
func (s *Session) Timeout() time.Duration {
	st := s.tap.state()
	if st.sid == 0 {
		return 0
	}
	return st.timeout
}

// Close closes the conn, which ends the session at once: the server
// deletes its nodes.
func (s *Session) Close() {
	s.tap.close()
	s.conn.Close()
}

// tap is what a Session knows of its session from the wire.
type tap struct {
	mu      sync.Mutex
	sid     int64         // current session, 0 when none
	timeout time.Duration // granted for sid (the smallest of its connect responses)
	anchor  time.Time     // the session was live at the leader after this instant
	changed chan struct{} // closed when sid changes
	ready   chan struct{} // closed at the first session
	closed  bool

	creates map[string]int64 // path → zxid of recent creates
	order   []string         // keys of creates, oldest first

	// Waiters for a create request to be written, by the path it asks
	// for (see awaitCreate); awaiting counts them, so that the writer
	// reads a create's path only when someone waits.
	sendWaits map[string]*sendWait
	awaiting  atomic.Int32
}

// maxCreates bounds the creates a tap remembers; a Store takes its own
// at once.
const maxCreates = 256

func newTap() *tap {
	return &tap{changed: make(chan struct{}), ready: make(chan struct{}), creates: map[string]int64{}, sendWaits: map[string]*sendWait{}}
}

// sessionState is a snapshot of a tap.
type sessionState struct {
	sid     int64
	timeout time.Duration
	anchor  time.Time
	changed <-chan struct{} // closed when the session changes
}

// left returns how long the session surely lives after now: the leader
// expires it no sooner than the timeout after it last heard from the
// client, which is after the anchor request was sent.
func (st sessionState) left(now time.Time) time.Duration {
	if st.sid == 0 {
		return 0
	}
	return st.anchor.Add(st.timeout).Sub(now)
}

func (t *tap) state() sessionState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sessionState{sid: t.sid, timeout: t.timeout, anchor: t.anchor, changed: t.changed}
}

// setSession switches to sid; call with mu held.
func (t *tap) setSession(sid int64) {
	if sid == t.sid {
		return
	}
	t.sid = sid
	close(t.changed)
	t.changed = make(chan struct{})
}

// connected records a connect response: sid 0 means the session expired.
// The request was sent at sent, so a live session was touched after it.
func (t *tap) connected(sid int64, timeout time.Duration, sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if sid == 0 || timeout <= 0 {
		t.setSession(0)
		return
	}
	if sid != t.sid {
		t.setSession(sid)
		t.timeout, t.anchor = timeout, sent
	} else {
		t.timeout = min(t.timeout, timeout)
		if sent.After(t.anchor) {
			t.anchor = sent
		}
	}
	select {
	case <-t.ready:
	default:
		close(t.ready)
	}
}

// heartbeat records that sid was live at the leader after sent: the send
// time of the heartbeat before the one just answered (or of the connect
// request). The leader expires sessions, and hears of a client's
// heartbeats through its follower's next ping reply (every half tick),
// not from the forwarded sync, whose answer proves only that the
// follower's earlier replies reached it: so the leader knew of the
// previous heartbeat, a third of the session timeout earlier (more than
// half a tick), before it answered this one.
func (t *tap) heartbeat(sid int64, sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sid == t.sid && sid != 0 && sent.After(t.anchor) {
		t.anchor = sent
	}
}

// created records the zxid of a create's reply: the new node's czxid.
func (t *tap) created(path string, zxid int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.creates[path]; !ok {
		t.order = append(t.order, path)
	}
	t.creates[path] = zxid
	for len(t.order) > maxCreates {
		delete(t.creates, t.order[0])
		t.order = t.order[1:]
	}
}

// takeCreate returns and forgets the czxid of the node a create made at
// path.
func (t *tap) takeCreate(path string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	z, ok := t.creates[path]
	delete(t.creates, path) // its key stays in order until evicted: harmless
	return z, ok
}

// sendWait waits for a create request of path (the path asked for,
// before a sequence number is added) to be written to the conn: sent is
// closed then. A request queued on the conn after that goes out behind
// the create, on the same connection or a later one.
type sendWait struct {
	path string
	sent chan struct{}
	next *sendWait // the next waiter for the same path
}

// awaitCreate registers w (see sendWait); call stopWait once no longer
// waiting.
func (t *tap) awaitCreate(w *sendWait) {
	t.mu.Lock()
	w.next = t.sendWaits[w.path]
	t.sendWaits[w.path] = w
	t.mu.Unlock()
	t.awaiting.Add(1)
}

// stopWait unregisters w, unless its create was written already.
func (t *tap) stopWait(w *sendWait) {
	t.mu.Lock()
	defer t.mu.Unlock()
	head := t.sendWaits[w.path]
	switch {
	case head == w && w.next == nil:
		delete(t.sendWaits, w.path)
	case head == w:
		t.sendWaits[w.path] = w.next
	default:
		p := head
		for p != nil && p.next != w {
			p = p.next
		}
		if p == nil {
			return // woken already
		}
		p.next = w.next
	}
	w.next = nil
	t.awaiting.Add(-1)
}

// createSent wakes the waiters for a create request of path (the
// request's bytes, read in place: no copy is made of the path).
func (t *tap) createSent(path []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := t.sendWaits[string(path)]
	delete(t.sendWaits, string(path))
	n := int32(0)
	for w := ws; w != nil; {
		next := w.next
		w.next = nil
		close(w.sent)
		n++
		w = next
	}
	t.awaiting.Add(-n)
}

func (t *tap) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setSession(0)
	t.closed = true
}
