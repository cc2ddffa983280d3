package lease

import (
	"log/slog"
	"time"
)

// Detecting steps of the store server's clock.
//
// The server decides every expiry on its own clock; the holder's deadline
// assumes that this clock runs with the Manager's monotonic clock. A step
// of the server's clock breaks that: a step forward by D ends every grant
// written before it D early, on the server. A store that reports its
// clock's reading (Record.ServerTime) lets the Manager see such a step:
// between two replies, the server's clock can only have advanced by as
// much as the Manager's clock did between the first call's sending and
// the second's reply.
//
// Each lease keeps the sample of its last confirmed call. The server's
// offset (its reading minus the Manager's clock at the instant of the
// reading) lies, for a sample, in [server − recv, server − sent]. When a
// later sample's least offset exceeds an earlier sample's greatest by more
// than the tolerance, the server's clock stepped forward in between by at
// least that much; the grant confirmed by the earlier sample ends on the
// server as much as the later sample's greatest offset exceeds the earlier
// one's before the holder's deadline (the Manager cannot tell where in the
// second call the server read its clock). Symmetrically, a later sample's
// greatest offset below an earlier one's least is a step back.

// clockSample is one reply of the store's server with its clock reading:
// the Manager's clock when the call was sent and when its reply arrived,
// and the server's reading in between. A zero server: none reported.
type clockSample struct {
	sent, recv, server time.Time
}

// known reports whether the sample has a server reading.
func (c clockSample) known() bool { return !c.server.IsZero() }

// sample returns the sample of the call that confirmed l.rec (kept as two
// durations and rec's reading, so that a Lease stays small). l.mu is held.
func (l *Lease) sample() clockSample {
	if l.rec.ServerTime.IsZero() {
		return clockSample{}
	}
	sent := l.s.m.started.Add(l.sentAt)
	return clockSample{sent: sent, recv: sent.Add(l.rtt), server: l.rec.ServerTime}
}

// minTolerance bounds the step tolerance below: the stores report their
// clocks to the millisecond.
const minTolerance = 5 * time.Millisecond

// stepTolerance returns the least step the Manager reports: a quarter of
// the safety margin, at least minTolerance. Smaller steps, and the rate
// differences between NTP-disciplined clocks over the seconds between two
// renewals (at most 500 ppm), are absorbed by the safety margin.
func (c *config) stepTolerance() time.Duration { return max(c.safety/4, minTolerance) }

// stepBetween compares a later sample b with an earlier sample a of one
// server's clock. It returns forward > 0 when the clock stepped forward in
// between by at least that much beyond tol, shift: how much sooner than
// the deadline of a's grant it may end on the server; and backward > 0
// when it stepped back by at least that much beyond tol.
func stepBetween(a, b clockSample, tol time.Duration) (forward, shift, backward time.Duration) {
	if !a.known() || !b.known() {
		return 0, 0, 0
	}
	// Offsets: [lo, hi] = [server − recv, server − sent], compared as
	// differences so that no absolute reading of the two clocks is mixed.
	served := b.server.Sub(a.server)
	if d := served - b.recv.Sub(a.sent); d > tol { // b.lo − a.hi
		return d, served - b.sent.Sub(a.sent), 0 // b.hi − a.hi
	}
	if d := b.sent.Sub(a.recv) - served; d > tol { // a.lo − b.hi
		return 0, 0, d
	}
	return 0, 0, 0
}

// clockStep checks a reply of l's store (the sample b, which confirmed or
// refused l's grant) against l's previous sample a, and acts on a step:
// it is logged and counted once, and on a forward step every other lease
// of the Manager whose grant the server confirmed before the step has its
// deadline brought forward by as much as the step ends that grant early.
// l's own grant, when b confirmed it, was written after the step and
// needs nothing. seen: an earlier reply already showed this step, and
// l's deadline was brought forward then; nothing is done again. No lock
// is held.
func (m *Manager) clockStep(l *Lease, a, b clockSample, seen bool) {
	if seen || !a.known() || !b.known() {
		return
	}
	tol := m.cfg.stepTolerance()
	fwd, _, back := stepBetween(a, b, tol)
	if fwd <= 0 && back <= 0 {
		return
	}
	n := m.stepped(l, a, b, tol)
	if fwd > 0 {
		m.obs.clockStep(true)
		m.logClockStep(l, true, fwd, n)
		return
	}
	// A step back keeps grants on the server longer than their holders
	// believe: waiters wait longer; nothing is unsafe.
	m.obs.clockStep(false)
	m.logClockStep(l, false, back, 0)
}

// stepped marks the leases other than l whose last confirmed sample
// predates the step that a sample b shows after l's sample a, so that
// their own next replies do not report it again, and on a forward step
// brings their deadlines forward; it returns how many deadlines moved. A
// lease is taken to share the server's clock when its own sample agrees,
// within tol, with a: a store of several servers whose clocks are apart
// (Redis Cluster, say) keeps the other servers' leases alone.
func (m *Manager) stepped(l *Lease, a, b clockSample, tol time.Duration) int {
	cfg := &m.cfg
	n := 0
	m.eachLease(func(o *Lease) {
		s := o.sample()
		if o == l || o.state >= leaseEnding || !s.known() {
			return
		}
		if f, _, bk := stepBetween(a, s, tol); f > 0 || bk > 0 {
			return // another clock, or a lease confirmed after the step
		}
		fwd, shift, back := stepBetween(s, b, tol)
		if fwd <= 0 && back <= 0 {
			return
		}
		o.stepSeen = true
		if fwd <= 0 {
			return
		}
		dl := cfg.deadline(s.sent, o.rec).Add(-shift)
		if !dl.Before(o.deadline) {
			return
		}
		o.deadline = dl
		m.timers.schedule(o, o.nextEvent())
		n++
	})
	return n
}

// logClockStep logs a step of the server's clock seen by a reply for l:
// its direction, the least size it had, and how many other leases'
// deadlines it brought forward.
func (m *Manager) logClockStep(l *Lease, forward bool, size time.Duration, shortened int) {
	if !m.logOn(slog.LevelWarn) {
		return
	}
	dir, msg := "backward", "store server's clock stepped back: grants last longer on the server"
	if forward {
		dir, msg = "forward", "store server's clock stepped forward: grants end early on the server"
	}
	m.logEvent(slog.LevelWarn, msg, EventClockStep,
		slog.String(LogKeyLock, l.name), slog.Uint64(LogKeyToken, l.token),
		slog.String(LogKeyDirection, dir), slog.Duration(LogKeyStep, size),
		slog.Int(LogKeyShortened, shortened))
}
