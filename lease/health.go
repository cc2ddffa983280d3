package lease

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// A HealthCheck tells whether a Manager keeps its leases, in the style of
// client-go's HealthzAdaptor: a liveness or readiness probe for a process
// that holds locks or leads. It is unhealthy while
//
//   - a held lease has had no renewal confirmed for longer than the
//     tolerance past the time its renewal was due (renewals failing, or
//     hanging), or
//   - the store has answered none of the Manager's calls for longer than
//     the call timeout ([WithCallTimeout]) while its calls keep failing
//     (the latest failure no longer ago than ttl: a Manager that stopped
//     calling a store has no news of it).
//
// It is healthy again as soon as renewals are confirmed and the store
// answers. A lease that is lost ends and no longer counts (its loss shows
// in the metrics and logs); a closed Manager is healthy. Checking takes
// each held lease's lock briefly and makes no store call.
type HealthCheck struct {
	m         *Manager
	tolerance time.Duration
}

// HealthCheck returns a health check of m (see [HealthCheck]) that
// tolerates a renewal overdue by up to tolerance. tolerance must be
// positive; it should exceed the store's normal call latency, and stay
// below the time from a due renewal to the lease's deadline (about
// 2/3 ttl + transition − safety margin, 9.7 s with the defaults), or a
// lease is lost before its renewals make the check fail. ttl/3 is a good
// start.
func (m *Manager) HealthCheck(tolerance time.Duration) (*HealthCheck, error) {
	if tolerance <= 0 {
		return nil, fmt.Errorf("%w: health tolerance %v is not positive", ErrInvalidArgument, tolerance)
	}
	return &HealthCheck{m: m, tolerance: tolerance}, nil
}

// Name returns "simba-lease", the check's name (as for a Kubernetes
// healthz checker).
func (h *HealthCheck) Name() string { return "simba-lease" }

// Check returns nil when healthy, else an error wrapping [ErrUnhealthy]
// that says why. The request is not used (it may be nil); the signature
// is that of a Kubernetes healthz checker.
func (h *HealthCheck) Check(*http.Request) error {
	m := h.m
	now := m.cfg.clock.Now()
	if name, token, late := m.mostOverdue(now); late > h.tolerance {
		return fmt.Errorf("%w: no renewal of %q (token %d) confirmed for %v past its due time (tolerance %v)",
			ErrUnhealthy, name, token, late, h.tolerance)
	}
	if down := m.storeDown(now); down > 0 {
		return fmt.Errorf("%w: the store has answered no call for %v (call timeout %v)",
			ErrUnhealthy, down, m.cfg.callTimeout)
	}
	return nil
}

// ServeHTTP answers 200 "ok" when healthy, else 503 with the reason.
func (h *HealthCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.Check(r); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// mostOverdue returns the held lease whose confirmed renewal is the most
// overdue at now, and by how much (0 when none is).
func (m *Manager) mostOverdue(now time.Time) (name string, token uint64, late time.Duration) {
	at := now.Sub(m.started)
	m.eachLease(func(l *Lease) {
		if d := at - l.due; l.state < leaseEnding && d > late {
			name, token, late = l.name, l.token, d
		}
	})
	return name, token, late
}

// storeHealth follows whether the store answers, as offsets on the
// Manager's clock from its start, plus one (0: none).
type storeHealth struct {
	failingSince atomic.Int64 // when the first call failed since the store last answered
	lastFailure  atomic.Int64 // when the latest call failed
}

// called records the outcome of a store call of op made under c, for the
// metrics and the health check. A call whose caller gave up is no news
// of the store.
func (m *Manager) called(op storeOp, c *callCtx, err error) {
	if err == nil || errors.Is(err, ErrNotHeld) {
		if m.health.failingSince.Load() != 0 {
			m.health.failingSince.Store(0)
		}
	} else if c.parent.Err() == nil {
		now := m.cfg.clock.Now()
		at := int64(now.Sub(m.started)) + 1
		// The store has not answered since this call was sent.
		m.health.failingSince.CompareAndSwap(0, max(at-int64(time.Since(c.start(m.cfg.callTimeout))), 1))
		m.health.lastFailure.Store(at)
	}
	if m.obs.on {
		m.obs.storeCall(op, time.Since(c.start(m.cfg.callTimeout)), err)
	}
}

// storeDown returns for how long the store has answered no call, when
// that is longer than the call timeout and calls kept failing until
// recently; else 0.
func (m *Manager) storeDown(now time.Time) time.Duration {
	since, last := m.health.failingSince.Load(), m.health.lastFailure.Load()
	if since == 0 {
		return 0
	}
	at := int64(now.Sub(m.started)) + 1
	down := time.Duration(at - since)
	if down <= m.cfg.callTimeout || time.Duration(at-last) > m.cfg.ttl {
		return 0
	}
	return down
}

// start returns when the call began (on the time package's clock).
func (c *callCtx) start(timeout time.Duration) time.Time { return c.deadline.Add(-timeout) }
