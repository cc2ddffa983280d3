package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Watch observes the owner of the lock name without contending. The
// channel receives the current owner first, then every change (a new
// grant, a release, an expiry), and is closed when ctx ends or the Manager
// closes. Changes are found by store events where the store pushes them,
// and by polling at the owner's transition end otherwise; a slow receiver
// sees only the latest owner.
//
// Watching costs the store about one Get per ttl while the lock is held
// (an owner that keeps renewing keeps its transition end ahead), and as
// much while it is free on a store that pushes changes. On a store that
// cannot push, a free lock is polled every ttl/4, at most a second apart.
func (m *Manager) Watch(ctx context.Context, name string) (<-chan Owner, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	ch := make(chan Owner)
	m.wg.Add(1)
	go m.watch(ctx, name, ch)
	return ch, nil
}

func (m *Manager) watch(ctx context.Context, name string, ch chan<- Owner) {
	defer m.wg.Done()
	defer close(ch)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var events <-chan Event
	var last Owner
	first, errs := true, 0
	for {
		if events == nil && m.watcher != nil {
			events, _ = m.watcher.Watch(ctx, name, "")
		}
		var rec Record
		err := m.call(ctx, opGet, func(ctx context.Context) (err error) {
			rec, err = m.store.Get(ctx, name)
			return err
		})
		var delay time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.logWatchFailed(name, err)
			delay = m.cfg.backoff(errs)
			errs++
		} else {
			errs = 0
			o := ownerOf(name, rec)
			if first || o.ID != last.ID || o.Token != last.Token {
				select {
				case ch <- o:
				case <-ctx.Done():
					return
				case <-m.closing:
					return
				}
				first, last = false, o
			}
			delay = m.watchDelay(rec, events != nil)
		}
		if !pause(m.cfg.clock, max(delay, minRetry), &events, nil, ctx.Done(), m.closing) {
			return
		}
	}
}

// watchDelay is how long a watch waits before its next Get after one that
// returned rec, with or without a live subscription to the store's events.
func (m *Manager) watchDelay(rec Record, push bool) time.Duration {
	switch {
	case rec.OwnerID != "" || rec.Transition > 0:
		// An owner that keeps renewing keeps its transition end ahead;
		// check at least once per ttl, shortly after it could lapse (a
		// lapse is not pushed).
		return min(rec.Transition, m.cfg.ttl) + rand.N(jitterEarly)
	case push:
		// Free: the next grant is pushed; poll once per ttl in case an
		// event was lost.
		return m.cfg.ttl + rand.N(jitterEarly)
	default:
		d := min(m.cfg.ttl/4, time.Second)
		return d + rand.N(d/5+1)
	}
}
