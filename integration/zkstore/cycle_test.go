package zkstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// More ZooKeeper opcodes the wire log names.
const wireDelete = 2

// wireFrames are the frames of a wire log: requests by opcode (pings
// left out), replies, and watch events the server pushed.
type wireFrames struct {
	requests map[int32]int
	replies  int
	events   int
}

func countFrames(evs []wireEvent) wireFrames {
	f := wireFrames{requests: map[int32]int{}}
	for _, e := range evs {
		switch {
		case e.xid == -2: // heartbeats and their replies
		case e.reply && e.xid == -1:
			f.events++
		case e.reply:
			f.replies++
		default:
			f.requests[e.op]++
		}
	}
	return f
}

// TestUncontendedCycleOnTheWire (issue 19): an Acquire and Release of a
// free lock through a Manager, as an application makes them in a loop,
// send three requests (create, list, delete: what go-zookeeper's lock
// recipe sends) and read three replies, and nothing else: in particular
// no watch event. A queue watch set by the Acquire's listing would be
// fired by the Release's own delete, and the server sends the event
// ahead of the delete's reply, which waits for it; a lock whose last
// grant ended before any renewal is left unwatched (its first renewal
// would list and watch it).
func TestUncontendedCycleOnTheWire(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	log := &wireLog{}
	s := newStore(t, loggedSession(t, srv.Servers(), log), srv.Root())
	m := manager(t, s, s.LeaseOptions()...)
	ctx := t.Context()
	const name = "cycle/wire"
	cycle := func() {
		t.Helper()
		l, err := m.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // makes the lock's znode
	const n = 20
	for i := range n {
		from := len(log.snapshot())
		cycle()
		time.Sleep(5 * time.Millisecond) // an event the delete fired has arrived by now
		f := countFrames(log.snapshot()[from:])
		want := map[int32]int{wireCreate: 1, wireChildren: 1, wireDelete: 1}
		if fmt.Sprint(f.requests) != fmt.Sprint(want) || f.replies != 3 || f.events != 0 {
			t.Fatalf("cycle %d sent requests %v (opcode: count), read %d replies and %d watch events; "+
				"want %v (create, list, delete), 3 replies, no event", i+2, f.requests, f.replies, f.events, want)
		}
	}
}

// TestBriefLockHeldLongNoticesDeletion (issue 19): a lock whose last
// grant ended before any renewal is acquired without a watch on its
// queue; held on, its first renewal lists and watches the queue (one
// request), later renewals send none, and a node deleted behind the
// Store's back is no grant any more from the next renewal on, as with a
// watch set at once.
func TestBriefLockHeldLongNoticesDeletion(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	spy := connect(t, srv.Servers(), tckSession).Conn()
	ctx := t.Context()
	const name, ttl, transition = "cycle/brief", 5 * time.Second, time.Second
	acquire := func() uint64 {
		t.Helper()
		rec, err := s.Acquire(ctx, name, "a", ttl, transition)
		if err != nil || !rec.Held("a") {
			t.Fatalf("Acquire = %+v, %v", rec, err)
		}
		return rec.Token
	}
	renew := func(token uint64) error {
		t.Helper()
		_, err := s.Renew(ctx, name, "a", token, ttl, transition)
		return err
	}
	token := acquire()
	if err := s.Release(ctx, name, "a", token); err != nil { // before any renewal: brief
		t.Fatal(err)
	}
	token = acquire()
	before := trips(s)
	for i := range 3 {
		if err := renew(token); err != nil {
			t.Fatalf("renewal %d: %v", i+1, err)
		}
	}
	if d := trips(s) - before; d != 1 {
		t.Errorf("three renewals of an unwatched queue sent %d requests, want 1 (the first lists and watches)", d)
	}
	names, _, err := spy.Children(dir(s, name))
	if err != nil || len(names) != 1 {
		t.Fatalf("Children = %v, %v", names, err)
	}
	if err := spy.Delete(dir(s, name)+"/"+names[0], -1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second) // the watch's event is on its way
	for {
		err := renew(token)
		if errors.Is(err, lease.ErrNotHeld) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("renewal after the node was deleted: %v, want ErrNotHeld", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Released after a renewal, the lock is watched at once again: its
	// renewals send nothing.
	token = acquire()
	if err := renew(token); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, name, "a", token); err != nil {
		t.Fatal(err)
	}
	token = acquire()
	before = trips(s)
	if err := renew(token); err != nil {
		t.Fatal(err)
	}
	if d := trips(s) - before; d != 0 {
		t.Errorf("the renewal of a lock last held past a renewal sent %d requests, want none (watched at once)", d)
	}
}
