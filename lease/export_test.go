package lease

// PerNameEntries returns how many per-name entries m keeps (slots,
// abandoned and unreleased grants), for the tests of bounded state.
func PerNameEntries(m *Manager) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.slots) + len(m.abandonedUntil) + len(m.unreleased)
}
