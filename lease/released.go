package lease

import (
	"hash/maphash"
	"time"
)

// A store hands an owner its current grant again when that owner asks
// (Acquire is idempotent, so that a retry after a lost reply finds its
// grant). A grant this Manager has released must never come back that
// way: its holder was told the lease ended, and a new lease under the same
// fencing token could not be told apart from it. It does come back when
// the store forgot the release but not the grant: a Redis replica promoted
// before the release reached it, a restart from a snapshot taken before
// the release. So the Manager remembers, per name, the newest token it
// released, and for ttl + transition after the release (the longest such
// a grant can outlive it) refuses any grant whose token is not newer: it
// gives the grant back and tries again after a back-off, as for a grant it
// declared lost. After that window a token that is not newer is a new
// grant of a store whose tokens went back (see the package documentation
// on when they may), not ours: refusing it for longer would starve us.
//
// The memory is a small table per registry shard (releasedWays entries,
// keyed by the name's hash, the oldest entry evicted), so it stays bounded
// however many names are used; a name evicted from it is protected as
// before, by the store alone.

// releasedWays is the number of names each shard remembers.
const releasedWays = 8

// releasedToken is an entry of a shard's table: the hash of a name and
// the newest token of it that this Manager released.
type releasedToken struct {
	hash      uint64
	token     uint64
	until     time.Time // the end of the refusal window
	contended bool      // the last grant released came after a lost attempt
}

// noteReleased records that token of name was released; waited says the
// grant came after a lost attempt.
func (m *Manager) noteReleased(name string, token uint64, waited bool) {
	h := maphash.String(m.seed, name)
	sh := &m.shards[h%slotShards]
	until := m.cfg.clock.Now().Add(m.cfg.ttl + m.cfg.transition)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for i := range sh.released {
		if e := &sh.released[i]; e.hash == h {
			e.token, e.until, e.contended = max(e.token, token), until, waited
			return
		}
	}
	sh.released[sh.nextReleased] = releasedToken{h, token, until, waited}
	sh.nextReleased = (sh.nextReleased + 1) % releasedWays
}

// wasReleased reports whether token of name is not newer than a token of
// name this Manager released within the refusal window: a grant the store
// must not have handed out.
func (m *Manager) wasReleased(name string, token uint64) bool {
	e, ok := m.released(name)
	return ok && token <= e.token
}

// wasContended reports whether this Manager released a grant of name
// within the refusal window whose acquisition had lost an attempt first:
// the name is likely contended, so the next acquisition subscribes before
// its first attempt.
func (m *Manager) wasContended(name string) bool {
	e, ok := m.released(name)
	return ok && e.contended
}

// released returns the entry of name's latest release while it is within
// the refusal window.
func (m *Manager) released(name string) (releasedToken, bool) {
	h := maphash.String(m.seed, name)
	sh := &m.shards[h%slotShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, e := range sh.released {
		if e.hash == h && e.token != 0 {
			return e, m.cfg.clock.Now().Before(e.until)
		}
	}
	return releasedToken{}, false
}
