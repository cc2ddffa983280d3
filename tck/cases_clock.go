package tck

import (
	"errors"
	"time"

	"github.com/simba-go/simba/lease"
)

// caseServerClock checks the server's clock readings a store reports
// (lease.Record.ServerTime), which the lease compares with its own
// monotonic time to detect steps of the server's clock. A store may report
// none (zero), on some calls or all. While nobody steps its clock, each
// reading lies where the client's own clock allows: between two calls, the
// server's clock advanced at least as much as the client's from the first
// reply to the second request, and at most as much as from the first
// request to the second reply (give or take the store's millisecond
// rounding). A reading that runs ahead of that is what the lease takes for
// a forward step, so a store that fails here would make Managers shorten
// leases for nothing.
func caseServerClock(e *env) {
	raw := e.client()
	name := e.name("clock")
	id := ghostID()
	type reading struct {
		what       string
		sent, recv time.Time
		server     time.Time
	}
	var rs []reading
	call := func(what string, f func() (lease.Record, error)) lease.Record {
		e.t.Helper()
		sent := time.Now()
		rec, err := f()
		recv := time.Now()
		if err != nil && !errors.Is(err, lease.ErrNotHeld) {
			e.t.Fatalf("%s: %v", what, err)
		}
		rs = append(rs, reading{what, sent, recv, rec.ServerTime})
		return rec
	}
	rec := call("Acquire", func() (lease.Record, error) { return raw.Acquire(e.ctx, name, id, e.ttl, e.transition) })
	if rec.OwnerID != id {
		e.t.Fatalf("Store.Acquire of a free lock = %+v", rec)
	}
	for i := 0; i < 3; i++ {
		time.Sleep(e.ttl / 20)
		call("Renew", func() (lease.Record, error) { return raw.Renew(e.ctx, name, id, rec.Token, e.ttl, e.transition) })
		call("Get", func() (lease.Record, error) { return raw.Get(e.ctx, name) })
	}
	if b, ok := raw.(lease.BatchRenewer); ok {
		call("RenewMany", func() (lease.Record, error) {
			res, err := b.RenewMany(e.ctx, []lease.RenewRequest{{Name: name, Contender: id, Token: rec.Token, TTL: e.ttl, Transition: e.transition}})
			if err != nil {
				return lease.Record{}, err
			}
			return res[0].Record, res[0].Err
		})
	}
	if err := raw.Release(e.ctx, name, id, rec.Token); err != nil {
		e.t.Errorf("Store.Release by the holder: %v", err)
	}
	var p *reading // the last reading with the server's clock
	for i := range rs {
		r := &rs[i]
		if r.server.IsZero() {
			continue
		}
		if p != nil {
			served := r.server.Sub(p.server)
			lo, hi := r.sent.Sub(p.recv)-round, r.recv.Sub(p.sent)+round
			if served < lo || served > hi {
				e.t.Errorf("server clock advanced %v from %s to %s; the client's clock allows %v to %v: the reading is not the server's clock at the call, or the clock stepped",
					served, p.what, r.what, lo, hi)
			}
		}
		p = r
	}
}
