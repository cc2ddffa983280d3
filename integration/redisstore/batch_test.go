package redisstore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestRenewManyOneCommandPerLease renews leases on many locks in one
// round trip: a grant the Store made is one PEXPIRE (no script), others
// run the renew script (one call per slot on Redis Cluster), and results
// are per request as Renew would give.
func TestRenewManyOneCommandPerLease(t *testing.T) {
	t.Parallel()
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		srv := sharedRedis(t)
		c := dial(t, srv.Addr())
		n := &counter{}
		c.AddHook(n)
		testRenewMany(t, newStore(t, c, srv.KeyPrefix()), n, func(string) int64 { return 0 })
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		srv := sharedCluster(t)
		c := dialCluster(t, srv.Addrs())
		n := &counter{}
		c.AddHook(n)
		testRenewMany(t, newStore(t, c, srv.KeyPrefix()), n, func(m string) int64 {
			slot, err := c.ClusterKeySlot(bg, recordKeyOf(srv.KeyPrefix(), m)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return slot
		})
	})
}

// testRenewMany wants a PEXPIRE per own grant and a script call per slot
// of the others (slotOf names a lock's slot, as the server computes it)
// in one round trip.
func testRenewMany(t *testing.T, st *redisstore.Store, n *counter, slotOf func(name string) int64) {
	var reqs []lease.RenewRequest
	for i := range 20 {
		m := fmt.Sprintf("batch/%d", i)
		tok := mustHold(t, st, m, "a").Token
		reqs = append(reqs, lease.RenewRequest{Name: m, Contender: "a", Token: tok, TTL: 2 * ttl, Transition: tr})
	}
	tokB := mustHold(t, st, "batch/b", "b").Token
	reqs = append(reqs,
		lease.RenewRequest{Name: "batch/b", Contender: "a", Token: tokB, TTL: ttl, Transition: tr}, // b's
		lease.RenewRequest{Name: "batch/none", Contender: "a", Token: 1, TTL: ttl, Transition: tr}, // never granted
		lease.RenewRequest{Name: "", Contender: "a", Token: 1, TTL: ttl, Transition: tr},           // invalid
	)
	slots := map[int64]bool{slotOf("batch/b"): true, slotOf("batch/none"): true}
	if _, err := st.RenewMany(bg, reqs); err != nil { // loads the script where needed
		t.Fatal(err)
	}
	n.reset()
	res, err := st.RenewMany(bg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:20] {
		want := lease.Record{OwnerID: "a", Token: reqs[i].Token, TTL: 2 * ttl, Transition: 2*ttl + tr, ServerTime: r.Record.ServerTime}
		if r.Err != nil || r.Record != want {
			t.Errorf("result %d = %+v, want %+v", i, r, want)
		}
	}
	if r := res[20]; !errors.Is(r.Err, lease.ErrNotHeld) || r.Record.OwnerID != "b" || r.Record.Token != tokB {
		t.Errorf("b's grant: %+v, want ErrNotHeld with b's record", r)
	}
	if r := res[21]; !errors.Is(r.Err, lease.ErrNotHeld) || r.Record != (lease.Record{ServerTime: r.Record.ServerTime}) {
		t.Errorf("never granted: %+v, want ErrNotHeld and a free record", r)
	}
	if !errors.Is(res[22].Err, lease.ErrInvalidName) {
		t.Errorf("invalid name: %+v", res[22])
	}
	if calls, pexpires, trips := n.get(); calls != len(slots) || pexpires != 20 || trips != 1 {
		t.Errorf("%d script calls and %d PEXPIRE in %d client round trips for 20 own grants and 2 others in %d slots, "+
			"want 20 PEXPIRE and one call per slot in 1", calls, pexpires, trips, len(slots))
	}
}

// recordKeyOf is the record key of lock under prefix, as keys.go lays it
// out.
func recordKeyOf(prefix, name string) string {
	return prefix + "{" + base64.RawURLEncoding.EncodeToString([]byte(name)) + "}:r"
}

// counter counts scripts, PEXPIREs and client-level round trips, and the
// words of all commands (of a script call: EVALSHA or EVAL, the SHA or the
// text, the number of keys, the keys and the arguments).
type counter struct {
	mu                           sync.Mutex
	calls, pexpires, trips, args int
	script                       []any // the words of the latest script call
}

func (n *counter) reset() {
	n.mu.Lock()
	n.calls, n.pexpires, n.trips, n.args = 0, 0, 0, 0
	n.mu.Unlock()
}

// words returns the words of the commands counted.
func (n *counter) words() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.args
}

// lastScript returns the words of the latest script call counted.
func (n *counter) lastScript() []any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.script
}

func (n *counter) get() (int, int, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls, n.pexpires, n.trips
}

func (n *counter) add(cmds []redis.Cmder) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.trips++
	for _, c := range cmds {
		n.args += len(c.Args())
		switch c.Name() {
		case "evalsha", "eval":
			n.calls++
			n.script = c.Args()
		case "pexpire":
			n.pexpires++
		}
	}
}

func (n *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (n *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		n.add([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (n *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n.add(cmds)
		return next(ctx, cmds)
	}
}
