package zkstore_test

import (
	"context"
	"encoding/binary"
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
	wireCreate   = 1
	wireChildren = 12 // getChildren2
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
	sess, err := zkstore.Connect(ctx, servers, tckSession, zkstore.WithDialer(dial),
		zkstore.WithConnOptions(zk.WithLogInfo(false), zk.WithLogger(quiet{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	return sess
}

// TestAcquireOneRoundTrip (issue 19): once a lock's znode is known, an
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
		create, listed, replied := int32(0), false, false
		for _, e := range log.snapshot()[from:] {
			switch {
			case !e.reply && e.op == wireCreate && create == 0:
				create = e.xid
			case !e.reply && e.op == wireChildren && create != 0 && !listed:
				listed = true
				if replied {
					t.Errorf("Acquire %d listed the queue after the create's reply came, want before", i+1)
				}
			case e.reply && e.xid == create && create != 0:
				replied = true
			}
		}
		if create == 0 || !listed {
			t.Errorf("Acquire %d: create seen %v, listing seen %v", i+1, create != 0, listed)
		}
		if err := s.Release(ctx, name, "a", rec.Token); err != nil {
			t.Fatal(err)
		}
	}
}
