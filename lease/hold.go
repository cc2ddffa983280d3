package lease

import (
	"context"
	"errors"
	"time"
)

// renewal is the outcome of one renew call, with the time it was sent.
type renewal struct {
	sent time.Time
	rec  Record
	err  error
}

// hold keeps l alive until it is released, abandoned or lost, and returns
// the token of a grant that may still be live on the store although the
// holder was told it ended (0 when the store released it or never had it).
//
// Store calls run in their own goroutines: the deadline timer fires even
// while a renewal hangs, and a hung call cannot delay Release.
func (s *slot) hold(ctx context.Context, l *Lease, sent time.Time) (lost uint64) {
	m, cfg := s.m, &s.m.cfg
	clk := cfg.clock
	deadline := l.Deadline()
	deadlineT := clk.NewTimer(deadline.Sub(clk.Now()))
	defer func() { deadlineT.Stop() }()
	renewT := clk.NewTimer(cfg.renewAt(sent, deadline, m.started, m.batch != nil).Sub(clk.Now()))
	defer func() { renewT.Stop() }()

	results := make(chan renewal, 1) // at most one renewal in flight
	inflight := false
	draining := false // a Contender is winding down under l
	attempt := 0
	closing := m.closing
	for {
		select {
		case <-deadlineT.C():
			if l.cancel(ErrLost); errors.Is(context.Cause(l.ctx), ErrLost) {
				cfg.logger.Warn("lease lost: no renewal confirmed before the deadline",
					"mutex", s.name, "token", l.token)
			}
			s.finish(l, nil)
			return l.token

		case <-renewT.C():
			if !inflight {
				inflight = true
				s.startRenew(ctx, l.token, results)
			}

		case r := <-results:
			inflight = false
			switch {
			case r.err == nil && r.rec.Held(cfg.id) && r.rec.Token == l.token:
				attempt = 0
				dl := cfg.deadline(r.sent, r.rec)
				l.confirm(r.rec, dl)
				dl = l.Deadline()
				deadlineT.Stop()
				deadlineT = clk.NewTimer(dl.Sub(clk.Now()))
				renewT = clk.NewTimer(cfg.renewAt(r.sent, dl, m.started, m.batch != nil).Sub(clk.Now()))
			case r.err == nil || errors.Is(r.err, ErrNotHeld):
				// The store says someone else's grant is current: the lease
				// is gone, and there is nothing of ours to release.
				l.cancel(ErrLost)
				cfg.logger.Warn("lease lost: the store reports another grant",
					"mutex", s.name, "token", l.token, "owner", r.rec.Owner)
				m.notifyOwner(ownerOf(s.name, r.rec))
				s.finish(l, nil)
				return 0
			default:
				cfg.logger.Warn("renew failed", "mutex", s.name, "token", l.token,
					"attempt", attempt+1, "error", r.err)
				renewT = clk.NewTimer(cfg.backoff(attempt))
				attempt++
			}

		case req := <-l.ends:
			draining = draining || !req.release && !req.abandon
			if done, lost := s.end(ctx, l, req); done {
				return lost
			}

		case <-closing:
			// Contenders were stopped first; what remains are plain leases,
			// and draining ones whose Contender releases them once its
			// callbacks return (a Close from inside a callback).
			closing = nil
			if draining {
				continue
			}
			if done, lost := s.end(ctx, l, endRequest{release: true}); done {
				return lost
			}
		}
	}
}

// end acts on a request to end l. It reports whether holding is over and,
// if so, the token of a grant that may still be live.
func (s *slot) end(ctx context.Context, l *Lease, req endRequest) (done bool, lost uint64) {
	l.cancel(ErrReleased)
	switch {
	case req.abandon:
		// A callback still runs under this grant: neither release it nor
		// acquire it again (that would extend it) until it could have
		// lapsed. A renewal whose reply was lost may have kept it live
		// longer: like a lost grant, its token is never handed out again.
		s.m.abandon(s.name, l.Deadline().Add(s.m.cfg.safety))
		s.finish(l, nil)
		return true, l.token
	case !req.release:
		return false, 0 // draining: keep the grant alive until told
	}
	err := s.releaseHeld(ctx, l)
	s.finish(l, err)
	if err != nil && !errors.Is(err, ErrNotHeld) {
		return true, l.token
	}
	s.m.notifyOwner(Owner{Mutex: s.name})
	return true, 0
}

// startRenew sends one renewal in its own goroutine.
func (s *slot) startRenew(ctx context.Context, token uint64, results chan<- renewal) {
	m, cfg := s.m, &s.m.cfg
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r := renewal{sent: cfg.clock.Now()}
		r.err = m.call(ctx, func(ctx context.Context) (err error) {
			if m.batch != nil {
				r.rec, err = m.batch.renew(ctx, RenewRequest{
					Mutex: s.name, Contender: cfg.id, Token: token,
					TTL: cfg.ttl, Transition: cfg.transition,
				})
				return err
			}
			r.rec, err = m.store.Renew(ctx, s.name, cfg.id, token, cfg.ttl, cfg.transition)
			return err
		})
		results <- r
	}()
}

// releaseHeld releases a held grant, retrying an unknown outcome a few
// times while the grant could still be live.
func (s *slot) releaseHeld(ctx context.Context, l *Lease) error {
	cfg := &s.m.cfg
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = s.release(ctx, l.token)
		if err == nil || errors.Is(err, ErrNotHeld) || !cfg.clock.Now().Before(l.Deadline()) {
			return err
		}
		t := cfg.clock.NewTimer(cfg.backoff(attempt))
		<-t.C()
	}
	return err
}

// finish marks the lease stopped, after marking the slot free: a caller
// whose Release has returned may acquire the mutex again at once.
func (s *slot) finish(l *Lease, result error) {
	s.setHolding(false)
	l.finish(result)
}
