package zkstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// TestRenewSendsNothing: a Manager holding eight locks keeps them through
// many renewal rounds without sending a single request: a grant lives
// with its session, whose heartbeats go-zookeeper sends anyway.
func TestRenewSendsNothing(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	const ttl = 2 * time.Second // a renewal round about every 333–667 ms
	m := manager(t, s, lease.WithTTL(ttl), lease.WithTransition(ttl/2))
	ctx := t.Context()
	const n = 8
	var held []*lease.Lease
	for i := range n {
		l, err := m.Acquire(ctx, "renew/"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	before, deadlines := trips(s), make([]time.Time, n)
	for i, l := range held {
		deadlines[i] = l.Deadline()
	}
	time.Sleep(2 * ttl) // the old deadlines have passed: only renewals keep the leases
	if d := trips(s) - before; d != 0 {
		t.Errorf("%d requests in %v for %d held leases, want none", d, 2*ttl, n)
	}
	for i, l := range held {
		if !l.Held() || !l.Deadline().After(deadlines[i]) {
			t.Errorf("lease %s: Held() = %v (%v), deadline moved by %v; want held and renewed",
				l.Name(), l.Held(), l.Err(), l.Deadline().Sub(deadlines[i]))
		}
		_ = l.Release(ctx)
	}
}

// TestRenewNoticesDeletedNode: a holder's node deleted behind the Store's
// back (by hand, say) is no grant any more: the next renewal after the
// queue changed says ErrNotHeld. The live grant beside it is renewed.
func TestRenewNoticesDeletedNode(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	spy := connect(t, srv.Servers(), tckSession).Conn()
	ctx := t.Context()
	const ttl, transition = 5 * time.Second, time.Second
	var reqs []lease.RenewRequest
	for _, name := range []string{"partial/live", "partial/gone"} {
		rec, err := s.Acquire(ctx, name, "a", ttl, transition)
		if err != nil || !rec.Held("a") {
			t.Fatalf("Acquire(%s) = %+v, %v", name, rec, err)
		}
		reqs = append(reqs, lease.RenewRequest{Name: name, Contender: "a", Token: rec.Token, TTL: ttl, Transition: transition})
	}
	names, _, err := spy.Children(dir(s, "partial/gone"))
	if err != nil || len(names) != 1 {
		t.Fatalf("Children = %v, %v", names, err)
	}
	if err := spy.Delete(dir(s, "partial/gone")+"/"+names[0], -1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second) // the watch's event is on its way
	for {
		res, err := s.RenewMany(ctx, reqs)
		if err != nil || len(res) != 2 {
			t.Fatalf("RenewMany = %+v, %v", res, err)
		}
		if res[0].Err != nil || !res[0].Record.Held("a") || res[0].Record.Token != reqs[0].Token {
			t.Errorf("live grant: %+v, want renewed with token %d", res[0], reqs[0].Token)
		}
		if errors.Is(res[1].Err, lease.ErrNotHeld) {
			break
		}
		if res[1].Err != nil || time.Now().After(deadline) {
			t.Fatalf("deleted grant: %+v, want ErrNotHeld", res[1])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
