package redisstore

import (
	"sync"
	"time"
)

// grants remembers, for the grants this Store made or renewed by script,
// their transition and when their record was last written, so a renewal
// can be a bare PEXPIRE of the grant key. The record must outlive the
// grant: every script writes it for at least the retention, so a record
// written at w (sent at w on this host) lives past w + retention, and a
// PEXPIRE sent before w + retention/2 for at most retention/4 keeps the
// grant inside it. Otherwise (no entry, an older record, a longer grant or
// another transition) a renewal runs the renew script, which writes the
// record again. The entries are hints only: correctness never depends on
// them.
type grants struct {
	mu     sync.Mutex
	m      map[grantRef]grantInfo
	pruned int // entries after the last prune
}

type grantInfo struct {
	tr      int64     // transition ms
	written time.Time // when the call that last wrote the record was sent
	// plain: the acquire script's fast path made the grant (its key a
	// string until a waiter or an observer comes), so a release may try
	// a GETDEL of its key first.
	plain bool
}

// grantRef identifies a grant. A struct, not a joined string: making
// one allocates nothing (it is made twice per acquire and release).
type grantRef struct {
	mutex, contender string
	token            uint64
}

// grantID identifies the grant of contender on lock with token.
func grantID(name, contender string, token uint64) grantRef {
	return grantRef{mutex: name, contender: contender, token: token}
}

// put notes that a call sent at written wrote the record of grant id,
// which the acquire script's fast path made when plain.
func (g *grants) put(id grantRef, tr int64, written time.Time, keep time.Duration, plain bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[grantRef]grantInfo{}
	}
	g.m[id] = grantInfo{tr: tr, written: written, plain: plain}
	if len(g.m) >= 2*max(g.pruned, 512) {
		// Entries of leases lost without a store call: drop those too old
		// to be of use, so the map stays within twice the live grants.
		for k, v := range g.m {
			if time.Since(v.written) > keep/2 {
				delete(g.m, k)
			}
		}
		g.pruned = len(g.m)
	}
}

// fast reports whether a renewal of grant id by ttl and tr may be a bare
// PEXPIRE.
func (g *grants) fast(id grantRef, ttl, tr int64, keep time.Duration) bool {
	g.mu.Lock()
	v, ok := g.m[id]
	g.mu.Unlock()
	keepMS := keep.Milliseconds()
	return ok && v.tr == tr && 4*(ttl+tr) <= keepMS && time.Since(v.written) < keep/2
}

// drop forgets grant id and reports whether the acquire script's fast
// path made it.
func (g *grants) drop(id grantRef) (plain bool) {
	g.mu.Lock()
	plain = g.m[id].plain
	delete(g.m, id)
	g.mu.Unlock()
	return plain
}
