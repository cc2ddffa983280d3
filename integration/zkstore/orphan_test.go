package zkstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// children returns the names of the contenders' nodes under the lock's
// znode: not the node warmUp plants, and none when the znode is gone (an
// empty container the server deleted at its periodic check).
func children(t *testing.T, s *zkstore.Store, srv *testserver.ZooKeeperServer, name string) []string {
	t.Helper()
	conn := connect(t, srv.Servers(), tckSession).Conn()
	names, _, err := conn.Children(dir(s, name))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("Children: %v", err)
	}
	return slices.DeleteFunc(names, func(n string) bool { _, ok := parseChild(n); return !ok })
}

// TestLostCreateReply (I7, S9): a node created by a create whose reply was
// lost is found and used by the retried Acquire; no second node is left.
func TestLostCreateReply(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	ctx := t.Context()
	const name = "i7/lost-create"
	for _, c := range []string{"holder", "waiter"} {
		if err := loseCreateReply(ctx, s, name, c, time.Second, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	before := children(t, s, srv, name)
	rec, err := s.Acquire(ctx, name, "holder", time.Second, time.Second)
	if err != nil || !rec.Held("holder") {
		t.Fatalf("Acquire after a lost create reply = %+v, %v; want held", rec, err)
	}
	if rec, err := s.Acquire(ctx, name, "waiter", time.Second, time.Second); err != nil || rec.OwnerID != "holder" {
		t.Fatalf("waiter's Acquire after a lost create reply = %+v, %v; want owner holder", rec, err)
	}
	after := children(t, s, srv, name)
	slices.Sort(before)
	slices.Sort(after)
	if len(before) != 2 || !slices.Equal(before, after) {
		t.Errorf("nodes before the retries %v, after %v; want the same two", before, after)
	}
}

// TestSlowCreateAbandoned (I7, S9): an Acquire gives up (its context
// ends) while its create is still on the wire; the create lands later.
// The next Acquire finds that node instead of leaving a second one.
func TestSlowCreateAbandoned(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	p, addrs := proxied(t, srv.Servers())
	s := newStore(t, connect(t, addrs, tckSession), srv.Root())
	ctx := t.Context()
	const name = "i7/slow-create"
	warmUp(t, s, srv, name)
	p[0].Delay(time.Second)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := s.Acquire(short, name, "a", 5*time.Second, 5*time.Second)
	cancel()
	if err == nil {
		t.Fatal("Acquire through a 1 s delay returned within 200 ms")
	}
	deadline := time.Now().Add(10 * time.Second) // the create lands
	for len(children(t, s, srv, name)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned create never landed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Heal()
	if n := children(t, s, srv, name); len(n) != 1 {
		t.Fatalf("after the abandoned create: nodes %v, want one", n)
	}
	rec, err := s.Acquire(ctx, name, "a", 5*time.Second, 5*time.Second)
	if err != nil || !rec.Held("a") {
		t.Fatalf("Acquire after the abandoned create = %+v, %v; want held", rec, err)
	}
	if n := children(t, s, srv, name); len(n) != 1 {
		t.Errorf("after the retry: nodes %v, want one", n)
	}
}

// TestAcquireTwice (S9): a repeated Acquire by the holder keeps its node
// and token; a repeated Acquire by a waiter keeps its place; Release with
// token 0 withdraws the waiter and leaves the holder alone.
func TestAcquireTwice(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	other := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	ctx := t.Context()
	const name = "i7/twice"
	first, err := s.Acquire(ctx, name, "a", time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Acquire(ctx, name, "a", time.Second, time.Second)
	if err != nil || again.Token != first.Token || !again.Held("a") {
		t.Errorf("second Acquire = %+v, %v; want the same grant, token %d", again, err, first.Token)
	}
	for range 2 {
		if rec, err := other.Acquire(ctx, name, "b", time.Second, time.Second); err != nil || rec.OwnerID != "a" || rec.Token != first.Token {
			t.Errorf("waiter's Acquire = %+v, %v; want owner a, token %d", rec, err, first.Token)
		}
	}
	if n := children(t, s, srv, name); len(n) != 2 {
		t.Errorf("nodes %v, want one per contender", n)
	}
	if err := other.Release(ctx, name, "b", 0); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release(0) by the waiter: %v, want ErrNotHeld", err)
	}
	if err := other.Release(ctx, name, "a", 0); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release(0) naming the holder: %v, want ErrNotHeld", err)
	}
	if n := children(t, s, srv, name); len(n) != 1 {
		t.Errorf("after the waiter withdrew: nodes %v, want the holder's only", n)
	}
	if err := s.Release(ctx, name, "a", first.Token); err != nil {
		t.Errorf("Release by the holder: %v", err)
	}
	if n := children(t, s, srv, name); len(n) != 0 {
		t.Errorf("after the release: nodes %v, want none", n)
	}
}

// TestLapsedGrantGetsNewToken (I1): an Acquire by the holder after its
// grant lapsed, with nobody else around, is a new grant: a new node with a
// larger token, never the lapsed one revived.
func TestLapsedGrantGetsNewToken(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	ctx := t.Context()
	const name = "i1/lapsed"
	// The first grant must last through the repeated Acquire on a loaded
	// machine and then lapse; the new grant must outlast the listing.
	const ttl, transition = time.Second, time.Second
	const lateTTL, lateTransition = 10 * time.Second, 10 * time.Second
	first, err := s.Acquire(ctx, name, "a", ttl, transition)
	if err != nil || !first.Held("a") {
		t.Fatalf("Acquire = %+v, %v", first, err)
	}
	if again, err := s.Acquire(ctx, name, "a", ttl, transition); err != nil || again.Token != first.Token {
		t.Fatalf("Acquire within the grant = %+v, %v; want token %d", again, err, first.Token)
	}
	time.Sleep(ttl + transition + 100*time.Millisecond)
	late, err := s.Acquire(ctx, name, "a", lateTTL, lateTransition)
	if err != nil || !late.Held("a") || late.Token <= first.Token {
		t.Errorf("Acquire after the grant lapsed = %+v, %v; want a new grant with a token above %d", late, err, first.Token)
	}
	if n := children(t, s, srv, name); len(n) != 1 {
		t.Errorf("nodes %v, want one", n)
	}
}

// TestLateCreateReplyKeepsGrant (I1): an Acquire gives up while its
// create's reply is on the way; the retried Acquire finds the node and
// grants it. The first create's reply, handled after that grant, must not
// replace the granted node with a fresh one: the holder's next Renew was
// then refused as "no such grant", its lease lost with nothing left to
// release, and the next Acquire granted the same node, under the same
// token, once more (the campaign's "token 356482285582 granted to
// zookeeper-ensemble-0-w0 at 9m5.155s and to zookeeper-ensemble-0-w0 at
// 9m5.368s").
func TestLateCreateReplyKeepsGrant(t *testing.T) {
	t.Parallel()
	const name = "i1/late-create-reply"
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	warmUp(t, s, srv, name)
	ctx := t.Context()
	arrived, resume, adopted := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	createAdopt(s, func(adopt func()) {
		first := false
		once.Do(func() { first = true })
		if !first {
			adopt()
			return
		}
		close(arrived)
		<-resume // the reply's handling waits: a goroutine a loaded machine runs late
		adopt()
		close(adopted)
	})
	t.Cleanup(func() {
		select {
		case <-resume:
		default:
			close(resume)
		}
	})
	short, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(short, name, "a", 5*time.Second, 5*time.Second)
		done <- err
	}()
	<-arrived // the create was applied and answered
	cancel()  // the caller gives up meanwhile
	if err := <-done; err == nil {
		t.Fatal("Acquire returned a grant though its caller gave up before the create's reply was handled")
	}
	// The retried Acquire waits for the reply's handling (settle): a
	// listing made before it may not show the node. Either way round, the
	// grant must survive the late reply.
	type result struct {
		rec lease.Record
		err error
	}
	retried := make(chan result, 1)
	go func() {
		rec, err := s.Acquire(ctx, name, "a", 5*time.Second, 5*time.Second)
		retried <- result{rec, err}
	}()
	close(resume)
	<-adopted
	r := <-retried
	rec, err := r.rec, r.err
	if err != nil || !rec.Held("a") {
		t.Fatalf("retried Acquire = %+v, %v; want held", rec, err)
	}
	if _, err := s.Renew(ctx, name, "a", rec.Token, 5*time.Second, 5*time.Second); err != nil {
		t.Errorf("Renew of the grant after the abandoned create's reply was handled: %v; want renewed", err)
	}
}

// TestCreateAfterGivingUpIsNotSent (I7): the goroutine that sends an
// Acquire's create runs only after its caller gave up (a loaded machine
// runs it late). The create must not go out then: sent behind the retried
// Acquire, its release and the next look, it left a node nobody knew of,
// which owned the lock its holder had just released (make test's TCK
// OddNames on the ensemble: "is held by "tck-id/…b" after its release").
func TestCreateAfterGivingUpIsNotSent(t *testing.T) {
	t.Parallel()
	const name = "i7/late-create-request"
	srv, s, other := twoStores(t, name)
	ctx := t.Context()
	held, resume, decided := make(chan struct{}), make(chan struct{}), make(chan bool, 1)
	var once sync.Once
	beforeRequest(s, func(start func() bool) {
		first := false
		once.Do(func() { first = true })
		if !first {
			start()
			return
		}
		close(held)
		<-resume // the request's goroutine runs late
		decided <- start()
	})
	t.Cleanup(func() {
		select {
		case <-resume:
		default:
			close(resume)
		}
	})
	short, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(short, name, "b", 5*time.Second, 5*time.Second)
		done <- err
	}()
	<-held   // the create's goroutine has not sent its request yet
	cancel() // the caller gives up meanwhile
	if err := <-done; err == nil {
		t.Fatal("Acquire returned a grant though its create was never sent")
	}
	rec, err := s.Acquire(ctx, name, "b", 5*time.Second, 5*time.Second)
	if err != nil || !rec.Held("b") {
		t.Fatalf("retried Acquire = %+v, %v; want held", rec, err)
	}
	if err := s.Release(ctx, name, "b", rec.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	createdLate := make(chan struct{})
	var seen sync.Once
	createAdopt(s, func(adopt func()) { adopt(); seen.Do(func() { close(createdLate) }) })
	close(resume)
	if <-decided {
		// The create went out after all: wait for its reply.
		select {
		case <-createdLate:
		case <-time.After(30 * time.Second):
		}
	}
	wantNoNodes(t, s, other, srv, name, "after the release")
}

// TestAcquireSettlesAbandonedCreate (I7): an Acquire gives up after its
// create's goroutine began but before the request went out. The retried
// Acquire must wait for that create: listing before it went out, it found
// no node, created a second one and was granted it; its release left the
// late node behind, owning the lock.
func TestAcquireSettlesAbandonedCreate(t *testing.T) {
	t.Parallel()
	const name = "i7/abandoned-create"
	srv, s, other := twoStores(t, name)
	ctx := t.Context()
	resume := abandonCreate(t, s, name, "b")
	type result struct {
		rec lease.Record
		err error
	}
	retried := make(chan result, 1)
	go func() {
		rec, err := s.Acquire(ctx, name, "b", 5*time.Second, 5*time.Second)
		retried <- result{rec, err}
	}()
	var r result
	select {
	case r = <-retried:
		// It did not wait: release before the abandoned create goes out.
		if r.err == nil && r.rec.Held("b") {
			if err := s.Release(ctx, name, "b", r.rec.Token); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
		t.Errorf("retried Acquire = %+v, %v before the abandoned create went out; want it to wait for it", r.rec, r.err)
		resume()
		time.Sleep(time.Second) // the late create's round trip
	case <-time.After(time.Second):
		resume()
		r = <-retried
		if r.err != nil || !r.rec.Held("b") {
			t.Fatalf("retried Acquire = %+v, %v; want held", r.rec, r.err)
		}
		if err := s.Release(ctx, name, "b", r.rec.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	wantNoNodes(t, s, other, srv, name, "after the release")
}

// TestReleaseSettlesAbandonedCreate (I7): as above, but the Manager's
// clean-up after the failed Acquire (a Release without a token) comes
// first. It must wait for the create and withdraw its node, or the node
// owns the lock until the watchdog's deadline.
func TestReleaseSettlesAbandonedCreate(t *testing.T) {
	t.Parallel()
	const name = "i7/abandoned-create-release"
	srv, s, other := twoStores(t, name)
	ctx := t.Context()
	resume := abandonCreate(t, s, name, "b")
	released := make(chan error, 1)
	go func() { released <- s.Release(ctx, name, "b", 0) }()
	select {
	case err := <-released:
		t.Errorf("Release = %v before the abandoned create went out; want it to wait for it", err)
		resume()
		time.Sleep(time.Second) // the late create's round trip
	case <-time.After(time.Second):
		resume()
		if err := <-released; err != nil && !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release: %v", err)
		}
	}
	wantNoNodes(t, s, other, srv, name, "after the clean-up")
}

// twoStores returns a server with the lock's znode made, a Store that
// contends for the lock and another that looks at it.
func twoStores(t *testing.T, name string) (srv *testserver.ZooKeeperServer, s, other *zkstore.Store) {
	t.Helper()
	srv = testserver.ZooKeeper(t)
	s = newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	other = newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	warmUp(t, s, srv, name)
	return srv, s, other
}

// wantNoNodes checks that the lock has no owner (as other sees it) and no
// node left, when.
func wantNoNodes(t *testing.T, s, other *zkstore.Store, srv *testserver.ZooKeeperServer, name, when string) {
	t.Helper()
	if got, err := other.Get(t.Context(), name); err != nil || got.OwnerID != "" {
		t.Errorf("Get %s = %+v, %v; want no owner (a node of a create sent or answered after its caller gave up?)", when, got, err)
	}
	if n := children(t, s, srv, name); len(n) != 0 {
		t.Errorf("nodes %v %s, want none", n, when)
	}
}

// abandonCreate makes an Acquire of contender give up after its create's
// goroutine began but before the request went out; resume lets the
// request go.
func abandonCreate(t *testing.T, s *zkstore.Store, name, contender string) (resume func()) {
	t.Helper()
	held, gate := make(chan struct{}), make(chan struct{})
	var once, opened sync.Once
	resume = func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(resume)
	beforeRequest(s, func(start func() bool) {
		first := false
		once.Do(func() { first = true })
		start()
		if first {
			close(held)
			<-gate // begun, but its request is not sent yet
		}
	})
	short, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(short, name, contender, 5*time.Second, 5*time.Second)
		done <- err
	}()
	<-held
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Acquire returned a grant though its create was not sent")
	}
	return resume
}

// warmUp makes the lock's znode (a grant, released) and keeps it for
// the test.
func warmUp(t *testing.T, s *zkstore.Store, srv *testserver.ZooKeeperServer, name string) {
	t.Helper()
	warm, err := s.Acquire(t.Context(), name, "warm", time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The server deletes a container once it is empty, at a check every
	// 60 s: within a test's window of a second, one run in sixty lost the
	// lock's znode under a create still on the wire ("Children: zk: node
	// does not exist"). A node no contender could have written (no '-',
	// skipped by the queue) keeps it for the test.
	conn := connect(t, srv.Servers(), tckSession).Conn()
	if _, err := conn.Create(dir(s, name)+"/keep", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("Create keep: %v", err)
	}
	if err := s.Release(t.Context(), name, "warm", warm.Token); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseInDoubtNeverRegranted (I1, I6): a Release whose delete failed
// (its context ended: the delete may still land) leaves the node to be
// deleted in the background. Until then the node is still listed in the
// queue, ours and first in line; the holder's next Acquires must not take
// it back: granted again under the released token, it would be deleted
// under the new holder by the pending delete, and the next in line
// granted while the holder believes it holds.
func TestReleaseInDoubtNeverRegranted(t *testing.T) {
	t.Parallel()
	const name = "i1/release-in-doubt"
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	warmUp(t, s, srv, name)
	ctx := t.Context()
	resume := holdRetire(s)
	t.Cleanup(resume)
	first, err := s.Acquire(ctx, name, "a", 5*time.Second, 5*time.Second)
	if err != nil || !first.Held("a") {
		t.Fatalf("Acquire = %+v, %v; want held", first, err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Release(gone, name, "a", first.Token); err == nil {
		t.Fatal("Release under an ended context returned nil; want its error (the delete's outcome unknown)")
	}
	for i := range 3 {
		rec, err := s.Acquire(ctx, name, "a", 5*time.Second, 5*time.Second)
		if err == nil && rec.Token == first.Token {
			t.Fatalf("Acquire %d after the release in doubt = %+v: the released grant's token again; want another node or a wait", i+1, rec)
		}
		t.Logf("Acquire %d = %+v, %v", i+1, rec, err)
	}
	resume()
	deadline := time.Now().Add(time.Minute)
	for {
		rec, err := s.Acquire(ctx, name, "a", 5*time.Second, 5*time.Second)
		if err == nil && rec.Held("a") && rec.Token > first.Token {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire once the delete went through = %+v, %v; want held under a token above %d", rec, err, first.Token)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
