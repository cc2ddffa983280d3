package zkstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// TestNegotiatedTimeout (issue 14 item 5, S15): the server grants a
// shorter session than asked for (12 s asked, maxSessionTimeout 6 s). The
// Session knows the granted timeout, MaxGrant and LeaseOptions follow it,
// and a holder whose leases were sized to the 12 s asked for, then cut off
// by a black-holing proxy, is still told of its loss before the waiter's
// winning Acquire is sent: its deadline rests on the 6 s the server
// expires its session after, not on the 12 s it asked for.
func TestNegotiatedTimeout(t *testing.T) {
	t.Parallel()
	const asked, granted = 12 * time.Second, 6 * time.Second
	srv := testserver.PrivateZooKeeper(t, testserver.WithMaxSessionTimeout(granted))
	p, addrs := proxied(t, srv.Servers())
	hsess := connect(t, addrs, asked)
	if got := hsess.Timeout(); got != granted {
		t.Errorf("Session.Timeout() = %v, want the %v the server granted", got, granted)
	}
	hs := newStore(t, hsess, srv.Root())
	if got := hs.MaxGrant(); got != granted {
		t.Errorf("MaxGrant() = %v, want %v", got, granted)
	}
	lo, err := lease.NewManager(hs, hs.LeaseOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	_ = lo.Close(t.Context())

	ws := observe(newStore(t, connect(t, srv.Servers(), tckSession), srv.Root()))
	opts := []lease.Option{lease.WithTTL(asked * 5 / 8), lease.WithTransition(asked * 3 / 8)}
	hm, wm := manager(t, hs, opts...), manager(t, ws, opts...)
	ctx := t.Context()
	const name = "s15/negotiated"
	l1, err := hm.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(ctx, wm, name)
	time.Sleep(200 * time.Millisecond)
	cut := time.Now()
	p.Cut()

	g := await(t, waiter, asked+granted+10*time.Second, "takeover after the holder's session expired")
	if !closed(l1.Done()) {
		t.Fatalf("the waiter was granted %v after the cut while the holder's lease is live (deadline %v after the cut): two holders",
			g.at.Sub(cut), l1.Deadline().Sub(cut))
	}
	if sent := ws.sentAt(g.l.Token()); !l1.Deadline().Before(sent) {
		t.Errorf("the holder's deadline %v after the cut, the winning Acquire was sent %v after it: the holder must be told first",
			l1.Deadline().Sub(cut), sent.Sub(cut))
	}
	t.Logf("holder told %v after the cut, takeover %v after it", l1.Deadline().Sub(cut), g.at.Sub(cut))
	p.Heal()
	_ = g.l.Release(ctx)
}

// TestMaxGrant (issue 14 item 4): MaxGrant is the session timeout the
// server granted, whether it cut the request down or not, so that a
// Manager can refuse timings no grant outlives.
func TestMaxGrant(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t) // maxSessionTimeout 60 s
	for _, c := range []struct{ asked, want time.Duration }{
		{4 * time.Second, 4 * time.Second},
		{100 * time.Second, 60 * time.Second},
	} {
		s := newStore(t, connect(t, srv.Servers(), c.asked), srv.Root())
		if got := s.MaxGrant(); got != c.want {
			t.Errorf("asked for %v: MaxGrant() = %v, want %v", c.asked, got, c.want)
		}
	}
}
