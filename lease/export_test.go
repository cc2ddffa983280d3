package lease

// PerNameEntries returns how many per-name entries m keeps (slots,
// abandoned and unreleased grants), for the tests of bounded state.
func PerNameEntries(m *Manager) int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.slots)
		sh.mu.Unlock()
	}
	m.rmu.Lock()
	defer m.rmu.Unlock()
	return n + len(m.abandonedUntil) + len(m.unreleased)
}

// RecordClockStep records a server clock step on m's metrics, as the
// detector of server clock steps will.
func RecordClockStep(m *Manager, forward bool) { m.obs.clockStep(forward) }

// TimerWakes returns how many times m's leases woke its timers' goroutine
// to arm an earlier timer.
func TimerWakes(m *Manager) int {
	m.timers.mu.Lock()
	defer m.timers.mu.Unlock()
	return m.timers.wakes
}

// CallTimerArms returns how many times m's store calls made or reset the
// one runtime timer that ends them at their deadlines.
func CallTimerArms(m *Manager) int {
	m.calls.mu.Lock()
	defer m.calls.mu.Unlock()
	return m.calls.arms
}

// PendingCalls returns how many store calls, ended or not, wait in m's
// FIFO of call deadlines, and whether its timer is armed.
func PendingCalls(m *Manager) (n int, armed bool) {
	m.calls.mu.Lock()
	defer m.calls.mu.Unlock()
	return len(m.calls.q) - m.calls.head, !m.calls.armed.IsZero()
}
