package zkstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestGrantRefusesNodeOfEndedSession: an Acquire reads the queue, which
// still lists its node of session 1 first in line, and then the conn opens
// session 2 (session 1 expired while the process was stopped: the server
// deleted the node, and the next in line was granted). The grant must not
// vouch for the old node with the new session's heartbeats, and the Store
// forgets the node. (The chaos campaign's zookeeper-ensemble set-up saw a
// resumed waiter granted its old node's token 8 ms before the next in
// line was granted its own.)
func TestGrantRefusesNodeOfEndedSession(t *testing.T) {
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	sess := &Session{conn: conn, tap: newTap()}
	defer sess.Close()
	s, err := New(sess)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 3 * time.Second
	sess.tap.connected(1, timeout, time.Now().Add(-2*timeout)) // no heartbeat since: expired
	k := nodeKey{"stale/grant", "c"}
	n := &node{path: s.dirOf(k.mutex) + "/c-0000000001", session: 1, czxid: 41, g: grant{contender: "c", ttl: time.Second, transition: time.Second}, lowest: true}
	s.mu.Lock()
	s.stateLocked(k).n = n
	s.mu.Unlock()

	sess.tap.connected(0, 0, time.Now())       // the server says session 1 expired
	sess.tap.connected(2, timeout, time.Now()) // and the conn opens session 2
	rec, ok, err := s.grant(k, n, n.g, time.Now(), sess.tap.state())
	if ok || err != nil {
		t.Fatalf("granted node %s of ended session 1 under session 2: %+v, %v, %v", n.path, rec, ok, err)
	}
	if cur, _ := s.current(k); cur != nil {
		t.Errorf("the Store still knows node %s of session 1", cur.path)
	}
}

// TestGrantEncode: a node's data reads back as the grant it was written
// from, in the format of data version simba2, and its encoding costs one
// allocation (every Acquire that creates a node pays it).
func TestGrantEncode(t *testing.T) {
	for _, g := range []grant{
		{contender: "a", ttl: time.Millisecond},
		{contender: "host-1/pid 42\nx", ttl: 10 * time.Second, transition: 6 * time.Second},
		{contender: "z", ttl: time.Duration(maxMs) * time.Millisecond, transition: time.Duration(maxMs) * time.Millisecond},
	} {
		b := g.encode()
		want := fmt.Sprintf("simba2\n%d\n%d\n%s", g.ttl.Milliseconds(), g.transition.Milliseconds(), g.contender)
		if string(b) != want {
			t.Errorf("encode(%+v) = %q, want %q", g, b, want)
		}
		if back, err := decodeGrant(b); err != nil || back != g {
			t.Errorf("decodeGrant(encode(%+v)) = %+v, %v", g, back, err)
		}
	}
	g := grant{contender: "contender-7", ttl: 10 * time.Second, transition: 6 * time.Second}
	if n := testing.AllocsPerRun(100, func() { _ = g.encode() }); n != 1 {
		t.Errorf("encode: %v allocations, want 1", n)
	}
}
