package lease

import (
	"hash/maphash"
	"time"
)

// A store hands an owner its current grant again when that owner asks
// (Acquire is idempotent, so that a retry after a lost reply finds its
// grant, and it extends the grant). A grant this Manager has released must
// never come back that way: its holder was told the lease ended, and a new
// lease under the same fencing token could not be told apart from it. It
// does come back when the store forgot the release but not the grant: a
// Redis replica promoted before the release reached it, a restart from a
// snapshot taken before it, a call of ours delayed in the network that
// reached the store after the release. So the Manager remembers, per
// name, the newest token it released, and refuses that token whenever a
// grant under it comes back: it gives the grant back and tries again after
// a back-off, as for a grant it declared lost. No window of time bounds
// this: the Manager's own attempts, and calls of its that reach the store
// late, extend the forgotten grant for as long as they go on (make chaos
// found the same token granted twice, 7 s apart, on SQLite after a cut and
// across a Redis failover, when this refusal ended ttl + transition after
// the release). By the store contract a new grant never reuses a token, so
// refusing the same token costs nothing but after a store that went back
// in its history, and then one give-back: the next grant's token is newer.
// An older token is refused for ttl + transition after the release (judged
// when the attempt was sent, not when its reply came): after that it is a
// new grant of a store whose tokens went back (see the package
// documentation on when they may), not ours, and refusing it for longer
// could starve us.
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
	m.noteToken(name, token, func(e *releasedToken) { e.contended = waited })
}

// noteGivenUp records that this Manager gave up token of name: it asked
// the store to release it (whatever the outcome), or left it to lapse.
// Every such grant, not only those a holder released, must never come
// back under its token: a lost lease's grant that a later call of ours
// extended, or that outlived its deadline on a server whose clock stepped
// back, did (make chaos on SQLite).
func (m *Manager) noteGivenUp(name string, token uint64) {
	m.noteToken(name, token, func(*releasedToken) {})
}

// noteToken raises the entry of name to token, restarts its refusal
// window, and lets set adjust it.
func (m *Manager) noteToken(name string, token uint64, set func(*releasedToken)) {
	h := maphash.String(m.seed, name)
	sh := &m.shards[h%slotShards]
	until := m.cfg.clock.Now().Add(m.cfg.ttl + m.cfg.transition)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for i := range sh.released {
		if e := &sh.released[i]; e.hash == h {
			e.token, e.until = max(e.token, token), until
			set(e)
			return
		}
	}
	e := &sh.released[sh.nextReleased]
	*e = releasedToken{hash: h, token: token, until: until}
	set(e)
	sh.nextReleased = (sh.nextReleased + 1) % releasedWays
}

// wasReleased reports whether token of name, granted to this Manager by
// an Acquire sent at sent, is a grant the store must not have handed out:
// the newest token of name this Manager released, or an older one within
// the refusal window as it was when the Acquire was sent (the store ran it
// at some point before its reply).
func (m *Manager) wasReleased(name string, token uint64, sent time.Time) bool {
	e, ok := m.released(name)
	return ok && (token == e.token || token < e.token && sent.Before(e.until))
}

// wasContended reports whether this Manager released a grant of name
// within the refusal window whose acquisition had lost an attempt first:
// the name is likely contended, so the next acquisition subscribes before
// its first attempt.
func (m *Manager) wasContended(name string) bool {
	e, ok := m.released(name)
	return ok && e.contended && m.cfg.clock.Now().Before(e.until)
}

// released returns the entry of name's latest release, if the Manager
// still remembers it.
func (m *Manager) released(name string) (releasedToken, bool) {
	h := maphash.String(m.seed, name)
	sh := &m.shards[h%slotShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, e := range sh.released {
		if e.hash == h && e.token != 0 {
			return e, true
		}
	}
	return releasedToken{}, false
}
