package zkstore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/zkstore"
)

// ZooKeeper opcodes the wire log names.
const (
	wireCreate    = 1
	wireExists    = 3
	wireGetData   = 4
	wireChildren  = 12 // getChildren2
	wireContainer = 19 // createContainer
)

// wireLog records, in order, the requests a connection wrote (opcode and
// xid) and the replies it read (xid), each frame as a whole.
type wireLog struct {
	mu     sync.Mutex
	events []wireEvent
}

type wireEvent struct {
	reply   bool
	xid, op int32
}

func (w *wireLog) add(e wireEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
}

func (w *wireLog) snapshot() []wireEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]wireEvent(nil), w.events...)
}

// loggedConn is a connection whose frames go to a wireLog: go-zookeeper
// writes whole frames, replies are cut out of the read stream (the first
// frame, the connect response, is not a reply).
type loggedConn struct {
	net.Conn
	log     *wireLog
	started bool
	in      []byte
	frames  int
}

func (c *loggedConn) Write(b []byte) (int, error) {
	if c.started {
		for off := 0; off+12 <= len(b); {
			n := int(binary.BigEndian.Uint32(b[off:]))
			c.log.add(wireEvent{xid: int32(binary.BigEndian.Uint32(b[off+4:])), op: int32(binary.BigEndian.Uint32(b[off+8:]))})
			off += 4 + n
		}
	}
	c.started = true
	return c.Conn.Write(b)
}

func (c *loggedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in = append(c.in, b[:n]...)
	for len(c.in) >= 4 {
		size := 4 + int(binary.BigEndian.Uint32(c.in))
		if len(c.in) < size {
			break
		}
		if c.frames > 0 && size >= 8 {
			c.log.add(wireEvent{reply: true, xid: int32(binary.BigEndian.Uint32(c.in[4:]))})
		}
		c.frames++
		c.in = c.in[size:]
	}
	return n, err
}

// loggedSession opens a Session whose frames go to log, and closes it
// when the test ends.
func loggedSession(t *testing.T, servers []string, log *wireLog) *zkstore.Session {
	return loggedSessionOf(t, servers, log, tckSession)
}

// loggedSessionOf is loggedSession with a session timeout of its own.
func loggedSessionOf(t *testing.T, servers []string, log *wireLog, session time.Duration) *zkstore.Session {
	t.Helper()
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &loggedConn{Conn: c, log: log}, nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sess, err := zkstore.Connect(ctx, servers, session, zkstore.WithDialer(dial),
		zkstore.WithConnOptions(zk.WithLogInfo(false), zk.WithLogger(quiet{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	return sess
}

// TestAcquireOneRoundTrip (issue 19): once a lock's znode exists, an
// uncontended Acquire sends its listing right behind its create, before
// the create's reply comes: both take one round trip. Every frame is
// held 30 ms by a proxy, so the reply cannot come before the listing is
// on its way unless the listing waited for it.
func TestAcquireOneRoundTrip(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	p, addrs := proxied(t, srv.Servers()[:1])
	log := &wireLog{}
	s := newStore(t, loggedSession(t, addrs, log), srv.Root())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const name = "pipeline/one"
	rec, err := s.Acquire(ctx, name, "a", 2*time.Second, time.Second) // makes the lock's znode
	if err != nil || !rec.Held("a") {
		t.Fatalf("first Acquire = %+v, %v", rec, err)
	}
	if err := s.Release(ctx, name, "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	p[0].Delay(30 * time.Millisecond)
	for i := range 3 {
		from := len(log.snapshot())
		before := trips(s)
		rec, err := s.Acquire(ctx, name, "a", 2*time.Second, time.Second)
		if err != nil || !rec.Held("a") {
			t.Fatalf("Acquire %d = %+v, %v", i+1, rec, err)
		}
		if d := trips(s) - before; d != 2 {
			t.Errorf("Acquire %d sent %d requests, want 2 (create, list)", i+1, d)
		}
		checkCreateListed(t, fmt.Sprintf("Acquire %d", i+1), log.snapshot()[from:])
		if err := s.Release(ctx, name, "a", rec.Token); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCreateListed fails t unless evs hold a create and a listing that
// went out before the create's reply came.
func checkCreateListed(t *testing.T, what string, evs []wireEvent) {
	t.Helper()
	create, listed, replied := int32(0), false, false
	for _, e := range evs {
		switch {
		case !e.reply && e.op == wireCreate && create == 0:
			create = e.xid
		case !e.reply && e.op == wireChildren && create != 0 && !listed:
			listed = true
			if replied {
				t.Errorf("%s listed the queue after the create's reply came, want before", what)
			}
		case e.reply && e.xid == create && create != 0:
			replied = true
		}
	}
	if create == 0 || !listed {
		t.Errorf("%s: create seen %v, listing seen %v", what, create != 0, listed)
	}
}

// TestNewStoreOneRoundTrip (issue 19): the first Acquire of a Store that
// never took the lock, whose znode another Store made, sends its listing
// right behind its create too: one round trip, 2 requests, as for a
// Store that took the lock before (one client of many, or a restarted
// one, taking a lock others took).
func TestNewStoreOneRoundTrip(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const name = "pipeline/new-store"
	other := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	rec, err := other.Acquire(ctx, name, "other", 2*time.Second, time.Second) // makes the lock's znode
	if err != nil || !rec.Held("other") {
		t.Fatalf("other Store's Acquire = %+v, %v", rec, err)
	}
	if err := other.Release(ctx, name, "other", rec.Token); err != nil {
		t.Fatal(err)
	}
	s, log := slowLoggedStore(t, srv)
	from, before := len(log.snapshot()), trips(s)
	rec, err = s.Acquire(ctx, name, "a", 2*time.Second, time.Second)
	if err != nil || !rec.Held("a") {
		t.Fatalf("new Store's Acquire = %+v, %v", rec, err)
	}
	if d := trips(s) - before; d != 2 {
		t.Errorf("new Store's Acquire sent %d requests, want 2 (create, list)", d)
	}
	checkCreateListed(t, "the new Store's Acquire", log.snapshot()[from:])
}

// slowLoggedStore returns a Store whose frames are logged and held 30 ms
// each way by a proxy.
func slowLoggedStore(t *testing.T, srv *testserver.ZooKeeperServer) (*zkstore.Store, *wireLog) {
	t.Helper()
	p, addrs := proxied(t, srv.Servers()[:1])
	log := &wireLog{}
	s := newStore(t, loggedSession(t, addrs, log), srv.Root())
	p[0].Delay(30 * time.Millisecond)
	return s, log
}

// TestNewLockThreeRoundTrips (issue 19): the first Acquire of a lock
// whose znode is missing sends its create and its listing together (both
// fail), creates the znode, and sends the create and the listing together
// again: 5 requests in 3 round trips.
func TestNewLockThreeRoundTrips(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, log := slowLoggedStore(t, srv)
	from, before := len(log.snapshot()), trips(s)
	rec, err := s.Acquire(ctx, "pipeline/new-lock", "a", 2*time.Second, time.Second)
	if err != nil || !rec.Held("a") {
		t.Fatalf("Acquire of a new lock = %+v, %v", rec, err)
	}
	if d := trips(s) - before; d != 5 {
		t.Errorf("Acquire of a new lock sent %d requests, want 5 (create, list, make the znode, create, list)", d)
	}
	evs := log.snapshot()[from:]
	for i, e := range evs {
		if !e.reply && e.op == wireContainer {
			checkCreateListed(t, "the create after the lock's znode was made", evs[i+1:])
			return
		}
	}
	t.Error("the lock's znode was not made")
}

// TestWaiterFurtherBackOneRoundTrip (issue 19): a waiter that queues
// behind another waiter reads the owner's node and watches the node just
// ahead of its own in one round trip: both requests go out before either
// reply comes. Every frame is held 30 ms by a proxy, so a reply cannot
// come before the second request is on its way unless that request
// waited for it.
func TestWaiterFurtherBackOneRoundTrip(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const name = "pipeline/behind"
	const ttl, transition = 5 * time.Second, 3 * time.Second
	holder := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	next := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	owner, err := holder.Acquire(ctx, name, "holder", ttl, transition)
	if err != nil || !owner.Held("holder") {
		t.Fatalf("holder's Acquire = %+v, %v", owner, err)
	}
	if rec, err := next.Acquire(ctx, name, "next", ttl, transition); err != nil || rec.OwnerID != "holder" {
		t.Fatalf("next in line's Acquire = %+v, %v", rec, err)
	}
	s, log := slowLoggedStore(t, srv)
	from, before := len(log.snapshot()), trips(s)
	rec, err := s.Acquire(ctx, name, "behind", ttl, transition)
	if err != nil || rec.OwnerID != "holder" || rec.Token != owner.Token {
		t.Fatalf("Acquire behind a waiter = %+v, %v; want owner holder, token %d", rec, err, owner.Token)
	}
	if d := trips(s) - before; d != 4 {
		t.Errorf("Acquire behind a waiter sent %d requests, want 4 (create, list, read the owner, watch the node ahead)", d)
	}
	read, watch := int32(0), int32(0)
	replied := false
	for _, e := range log.snapshot()[from:] {
		switch {
		case !e.reply && e.op == wireGetData && read == 0:
			read = e.xid
			if replied {
				t.Error("the owner was read after the watch's reply came, want both requests out at once")
			}
		case !e.reply && e.op == wireExists && watch == 0:
			watch = e.xid
			if replied {
				t.Error("the node ahead was watched after the owner's read was answered, want both requests out at once")
			}
		case e.reply && (e.xid == read && read != 0 || e.xid == watch && watch != 0):
			replied = true
		}
	}
	if read == 0 || watch == 0 {
		t.Errorf("owner read seen %v, watch seen %v", read != 0, watch != 0)
	}
}
