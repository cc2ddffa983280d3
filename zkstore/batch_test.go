package zkstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/lease"
)

// TestBatchRenew: a Manager holding eight mutexes renews them together,
// one multi request per round instead of eight requests, and keeps them.
//
// Not parallel: it counts rounds, which starting JVMs would stall.
func TestBatchRenew(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), tckSession, srv.Root())
	const ttl = time.Second // a renewal round about every 333 ms
	m := manager(t, s, lease.WithTTL(ttl), lease.WithTransition(ttl/2))
	ctx := t.Context()
	const n = 8
	var held []*lease.Lease
	for i := range n {
		l, err := m.Acquire(ctx, "batch/"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	before := s.Trips()
	const span = 3 * time.Second
	time.Sleep(span)
	trips := s.Trips() - before
	rounds := int64(span / (ttl / 3))
	t.Logf("%d requests in %v for %d leases (%d renewal rounds)", trips, span, n, rounds)
	if trips > n*rounds/2 {
		t.Errorf("%d requests in %v: renewals of %d leases are not batched (%d each would be %d)", trips, span, n, rounds, n*rounds)
	}
	for _, l := range held {
		if !l.Held() {
			t.Errorf("lease %s lost: %v", l.Name(), l.Err())
		}
		_ = l.Release(ctx)
	}
}

// TestBatchRenewPartial: when one grant of a batch is gone, the multi
// fails as a whole and each request is renewed on its own: the live grant
// is renewed, the gone one reports ErrNotHeld.
func TestBatchRenewPartial(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), tckSession, srv.Root())
	spy := connect(t, srv.Servers(), tckSession)
	ctx := t.Context()
	const ttl, transition = time.Second, time.Second
	var reqs []lease.RenewRequest
	for _, name := range []string{"partial/live", "partial/gone"} {
		rec, err := s.Acquire(ctx, name, "a", ttl, transition)
		if err != nil || !rec.Held("a") {
			t.Fatalf("Acquire(%s) = %+v, %v", name, rec, err)
		}
		reqs = append(reqs, lease.RenewRequest{Mutex: name, Contender: "a", Token: rec.Token, TTL: ttl, Transition: transition})
	}
	names, _, err := spy.Children(s.Dir("partial/gone"))
	if err != nil || len(names) != 1 {
		t.Fatalf("Children = %v, %v", names, err)
	}
	if err := spy.Delete(s.Dir("partial/gone")+"/"+names[0], -1); err != nil {
		t.Fatal(err)
	}
	res, err := s.RenewMany(ctx, reqs)
	if err != nil || len(res) != 2 {
		t.Fatalf("RenewMany = %+v, %v", res, err)
	}
	if res[0].Err != nil || !res[0].Record.Held("a") || res[0].Record.Token != reqs[0].Token {
		t.Errorf("live grant: %+v, want renewed with token %d", res[0], reqs[0].Token)
	}
	if !errors.Is(res[1].Err, lease.ErrNotHeld) {
		t.Errorf("gone grant: %+v, want ErrNotHeld", res[1])
	}
}
