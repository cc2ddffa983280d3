package lease

import (
	"sync"
	"sync/atomic"
	"time"
)

// refusals are the grants of a Manager that must not be used again: per
// lock, an abandoned grant to leave alone until it could have lapsed, and
// a token whose release failed. Entries expire; both maps are swept so
// that they stay bounded by the names used within about ttl +
// transition, even names never used again. Guarded by rmu, which is taken
// last (under any other lock of the Manager) and takes no other.
type refusals struct {
	rmu  sync.Mutex
	nref atomic.Int32 // entries in both maps, read without rmu

	// abandonedUntil holds, per lock, when a grant whose Stop gave up on
	// its callbacks has surely lapsed on the server.
	abandonedUntil map[string]time.Time
	// unreleased holds, per lock, a token of ours that the store may still
	// grant us but that must never be handed out again (its holder was
	// told the lease ended, and releasing it failed), and until when it
	// could still be live.
	unreleased map[string]unreleasedGrant
	// sweepAt is the number of entries at which the expired ones are swept
	// next, and swept when they last were.
	sweepAt int
	swept   time.Time
}

// unreleasedGrant is an entry of refusals.unreleased.
type unreleasedGrant struct {
	token uint64
	until time.Time
}

// abandon records that the grant of name must be left to lapse until then.
func (m *Manager) abandon(name string, until time.Time) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	m.abandonedUntil[name] = until
	m.sweep()
	m.counted()
}

// abandoned returns how long attempts on name must still wait for an
// abandoned grant to lapse (0: none).
func (m *Manager) abandoned(name string) time.Duration {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	return m.abandonedLocked(name)
}

// abandonedLocked is abandoned with rmu held.
func (m *Manager) abandonedLocked(name string) time.Duration {
	until, ok := m.abandonedUntil[name]
	if !ok {
		return 0
	}
	if d := until.Sub(m.cfg.clock.Now()); d > 0 {
		return d
	}
	delete(m.abandonedUntil, name)
	m.counted()
	return 0
}

// keepRefusing records that token of name could not be released: a later
// slot of name must give it up instead of handing it out. The record ends
// once the grant has surely lapsed on the server.
func (m *Manager) keepRefusing(name string, token uint64) {
	m.noteGivenUp(name, token)
	m.rmu.Lock()
	defer m.rmu.Unlock()
	m.unreleased[name] = unreleasedGrant{token, m.cfg.clock.Now().Add(m.cfg.ttl + m.cfg.transition)}
	m.sweep()
	m.counted()
}

// refused is refusedLocked, taking rmu.
func (m *Manager) refused(name string) uint64 {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	return m.refusedLocked(name)
}

// refusedLocked returns (and forgets) the token of name that keepRefusing
// recorded, 0 when none is still live. rmu is held.
func (m *Manager) refusedLocked(name string) uint64 {
	g, ok := m.unreleased[name]
	if !ok {
		return 0
	}
	delete(m.unreleased, name)
	m.counted()
	if !m.cfg.clock.Now().Before(g.until) {
		return 0
	}
	return g.token
}

// sweep drops the expired entries once their number has doubled since the
// last sweep, or ttl + transition after it (when every entry then present
// has expired): amortized, each entry added pays for one entry checked.
// rmu is held.
func (m *Manager) sweep() {
	n := len(m.abandonedUntil) + len(m.unreleased)
	if n == 0 {
		return
	}
	now := m.cfg.clock.Now()
	if n < m.sweepAt && now.Sub(m.swept) < m.cfg.ttl+m.cfg.transition {
		return
	}
	m.swept = now
	for name, until := range m.abandonedUntil {
		if !now.Before(until) {
			delete(m.abandonedUntil, name)
		}
	}
	for name, g := range m.unreleased {
		if !now.Before(g.until) {
			delete(m.unreleased, name)
		}
	}
	m.sweepAt = max(2*(len(m.abandonedUntil)+len(m.unreleased)), 64)
	m.counted()
}

// counted publishes the number of entries. rmu is held.
func (m *Manager) counted() {
	m.nref.Store(int32(len(m.abandonedUntil) + len(m.unreleased)))
}

// refusalsFor returns, for a caller about to use the slot of name, how
// long an abandoned grant must still be left alone, and, for a new slot,
// the token it must refuse. Without entries it takes no lock. Expired
// entries are swept on the way.
func (m *Manager) refusalsFor(name string, fresh bool) (wait time.Duration, token uint64) {
	if m.nref.Load() == 0 {
		return 0, 0
	}
	m.rmu.Lock()
	defer m.rmu.Unlock()
	m.sweep()
	wait = m.abandonedLocked(name)
	if fresh {
		token = m.refusedLocked(name)
	}
	return wait, token
}
