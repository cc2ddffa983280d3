package lease

import "time"

// refusals are the grants of a Manager that must not be used again: per
// mutex, an abandoned grant to leave alone until it could have lapsed, and
// a token whose release failed. Entries expire; both maps are swept so
// that they stay bounded by the names used within about ttl +
// transition, even names never used again. Guarded by the Manager's mu.
type refusals struct {
	// abandonedUntil holds, per mutex, when a grant whose Stop gave up on
	// its callbacks has surely lapsed on the server.
	abandonedUntil map[string]time.Time
	// unreleased holds, per mutex, a token of ours that the store may still
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
	m.mu.Lock()
	defer m.mu.Unlock()
	m.abandonedUntil[name] = until
	m.sweep()
}

// abandoned returns how long attempts on name must still wait for an
// abandoned grant to lapse (0: none).
func (m *Manager) abandoned(name string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.abandonedLocked(name)
}

// abandonedLocked is abandoned with m.mu held.
func (m *Manager) abandonedLocked(name string) time.Duration {
	until, ok := m.abandonedUntil[name]
	if !ok {
		return 0
	}
	if d := until.Sub(m.cfg.clock.Now()); d > 0 {
		return d
	}
	delete(m.abandonedUntil, name)
	return 0
}

// keepRefusing records that token of name could not be released: a later
// slot of name must give it up instead of handing it out. The record ends
// once the grant has surely lapsed on the server.
func (m *Manager) keepRefusing(name string, token uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unreleased[name] = unreleasedGrant{token, m.cfg.clock.Now().Add(m.cfg.ttl + m.cfg.transition)}
	m.sweep()
}

// refused is refusedLocked, taking m.mu.
func (m *Manager) refused(name string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refusedLocked(name)
}

// refusedLocked returns (and forgets) the token of name that keepRefusing
// recorded, 0 when none is still live. m.mu is held.
func (m *Manager) refusedLocked(name string) uint64 {
	g, ok := m.unreleased[name]
	if !ok {
		return 0
	}
	delete(m.unreleased, name)
	if !m.cfg.clock.Now().Before(g.until) {
		return 0
	}
	return g.token
}

// sweep drops the expired entries once their number has doubled since the
// last sweep, or ttl + transition after it (when every entry then present
// has expired): amortized, each entry added pays for one entry checked.
// m.mu is held.
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
}
