package zkstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
)

// TestGetTimeLeft: through the Store that holds a grant, Get reports the
// time left of it, which shrinks as time passes and grows again only
// with its holder's renewal; through another Store (another session),
// which cannot see renewals that write nothing, it reports the grant's
// whole ttl and transition, the longest it can last without a call.
func TestGetTimeLeft(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	holder := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	other := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	ctx := t.Context()
	const name, ttl, transition = "get/time-left", 4 * time.Second, 2 * time.Second
	g, err := holder.Acquire(ctx, name, "h", ttl, transition)
	granted := time.Now()
	if err != nil || !g.Held("h") {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	defer holder.Release(ctx, name, "h", g.Token)

	sent1 := time.Now()
	first, err := holder.Get(ctx, name)
	got1 := time.Now()
	if err != nil || first.OwnerID != "h" || first.Token != g.Token {
		t.Fatalf("Get through the holder's Store = %+v, %v", first, err)
	}
	if most := ttl + transition - sent1.Sub(granted); first.Transition > most || first.Transition-first.TTL != transition {
		t.Errorf("Get through the holder's Store %v after the grant: TTL %v, Transition %v; want Transition at most %v, transition %v after TTL",
			sent1.Sub(granted), first.TTL, first.Transition, most, transition)
	}
	time.Sleep(ttl / 8)
	sent2 := time.Now()
	second, err := holder.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if passed := sent2.Sub(got1); first.Transition-second.Transition < passed {
		t.Errorf("two Gets through the holder's Store %v apart report %v then %v left: the time left must shrink", passed, first.Transition, second.Transition)
	}

	seen, err := other.Get(ctx, name)
	if err != nil || seen.OwnerID != "h" || seen.Token != g.Token || seen.TTL != ttl || seen.Transition != ttl+transition {
		t.Errorf("Get through another Store = %+v, %v; want owner h, token %d, the whole ttl %v and transition", seen, err, g.Token, ttl)
	}

	renewed := time.Now()
	if _, err := holder.Renew(ctx, name, "h", g.Token, ttl, transition); err != nil {
		t.Fatal(err)
	}
	third, err := holder.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if least := ttl + transition - time.Since(renewed); third.Transition < least || third.Transition <= second.Transition {
		t.Errorf("Get after a renewal reports %v left (before it %v); want at least %v, ttl + transition from the renewal", third.Transition, second.Transition, least)
	}
}
