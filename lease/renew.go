package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sendRenewals sends the renewals the timers found due, off the timers'
// goroutine: in one RenewMany call for a batch store (renewals of one
// Manager are aligned on a grid, so they fall due together), else in one
// goroutine per Renew, so that a hung call delays no other lease. Each
// lease is marked in flight.
func (m *Manager) sendRenewals(ls []*Lease) {
	cfg := &m.cfg
	if m.batch != nil {
		batch := make([]*Lease, len(ls))
		copy(batch, ls)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			reqs := make([]RenewRequest, len(batch))
			for i, l := range batch {
				reqs[i] = RenewRequest{Name: l.name, Contender: cfg.id, Token: l.token, TTL: cfg.ttl, Transition: cfg.transition}
			}
			sent := cfg.clock.Now()
			var results []RenewResult
			err := m.call(context.Background(), opRenewMany, func(ctx context.Context) (err error) {
				results, err = m.batch.RenewMany(ctx, reqs)
				return err
			})
			if err == nil && len(results) != len(batch) {
				err = fmt.Errorf("lease: store returned %d results for %d renewals", len(results), len(batch))
			}
			for i, l := range batch {
				if err != nil {
					l.renewed(sent, Record{}, err)
					continue
				}
				l.renewed(sent, results[i].Record, results[i].Err)
			}
		}()
		return
	}
	for _, l := range ls {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			sent := cfg.clock.Now()
			var rec Record
			err := m.call(context.Background(), opRenew, func(ctx context.Context) (err error) {
				rec, err = m.store.Renew(ctx, l.name, cfg.id, l.token, cfg.ttl, cfg.transition)
				return err
			})
			l.renewed(sent, rec, err)
		}()
	}
}

// renewed applies the outcome of a renewal of l sent at sent: a
// confirmation extends the deadline (t_send + ttl + transition − safety)
// and schedules the next renewal; a refusal ends the lease at once; an
// error schedules a retry with back-off, until the deadline.
func (l *Lease) renewed(sent time.Time, rec Record, err error) {
	m := l.s.m
	cfg := &m.cfg
	var b clockSample
	if !rec.ServerTime.IsZero() {
		b = clockSample{sent: sent, recv: cfg.clock.Now(), server: rec.ServerTime}
	}
	l.mu.Lock()
	l.inflight = false
	if l.state >= leaseEnding { // released, lost or abandoned meanwhile
		l.mu.Unlock()
		return
	}
	switch {
	case err == nil && rec.Held(cfg.id) && rec.Token == l.token:
		a, seen := l.sample(), l.stepSeen
		l.sentAt, l.rtt, l.stepSeen = sent.Sub(m.started), b.recv.Sub(sent), false
		l.attempt = 0
		l.rec = rec
		if dl := cfg.deadline(sent, rec); dl.After(l.deadline) {
			l.deadline = dl
		}
		l.renewAt = cfg.renewAt(sent, l.deadline, m.started, m.batch != nil, l.gap)
		l.due = l.renewAt.Sub(m.started)
		m.timers.schedule(l, l.nextEvent())
		l.mu.Unlock()
		m.obs.renewal(l.name, true)
		m.logRenewed(l)
		m.clockStep(l, a, b, seen)
	case err == nil || errors.Is(err, ErrNotHeld):
		// The store says someone else's grant is current: the lease is
		// gone, and there is nothing of ours to release. Its reply still
		// shows the server's clock: a forward step may be why.
		a, seen := l.sample(), l.stepSeen
		l.mu.Unlock()
		m.clockStep(l, a, b, seen) // first: the step is why it is lost
		if l.refused(rec.OwnerID) {
			m.notifyOwner(ownerOf(l.name, rec))
		}
	default:
		attempt := l.attempt
		l.renewAt = cfg.clock.Now().Add(cfg.backoff(attempt))
		l.attempt++
		m.timers.schedule(l, l.nextEvent())
		l.mu.Unlock()
		m.obs.renewal(l.name, false)
		m.logRenewFailed(l, attempt+1, err)
	}
}

// nextEvent is when the timers must look at l next: its renewal, or its
// deadline while a renewal is in flight. l.mu is held.
func (l *Lease) nextEvent() time.Time {
	if l.inflight || l.deadline.Before(l.renewAt) {
		return l.deadline
	}
	return l.renewAt
}
