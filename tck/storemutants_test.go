package tck_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// The mistakes. Each returns a constructor of the broken store.

type mistake func(m *mutantStore)

func plant(f mistake) func(*memstore.Store) lease.Store {
	return func(s *memstore.Store) lease.Store {
		m := newMutantStore(s)
		f(m)
		return m.store()
	}
}

// held reports whether memstore has contender's grant with token live.
func held(m *mutantStore, name, c string, token uint64) bool {
	st := m.s.Inspect(name)
	return st.Owner != "" && st.Owner == c && st.Token == token
}

// firstAcquireLoses: the first Acquire of a lock the store never saw
// creates its state and reports the lock free instead of granting it.
func firstAcquireLoses(m *mutantStore) {
	seen := map[string]bool{}
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		if !seen[name] {
			seen[name] = true
			return m.s.Get(ctx, name)
		}
		return m.s.Acquire(ctx, name, c, ttl, tr)
	}
}

// earlyTakeover: another contender may take the lock once its ttl ended,
// in the holder's transition.
func earlyTakeover(m *mutantStore) {
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		if cur, err := m.s.Get(ctx, name); err == nil && cur.OwnerID != "" && cur.OwnerID != c && cur.TTL == 0 {
			m.s.Release(ctx, name, cur.OwnerID, cur.Token)
		}
		return m.s.Acquire(ctx, name, c, ttl, tr)
	}
}

// longTransition: grants and renewals run for twice the transition asked.
func longTransition(m *mutantStore) {
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		return m.s.Acquire(ctx, name, c, ttl, 2*tr)
	}
	m.renew = func(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
		return m.s.Renew(ctx, name, c, token, ttl, 2*tr)
	}
}

// reacquireNewToken: the holder's Acquire of its live grant bumps the
// token (a counter incremented on every Acquire). Client tokens are
// memstore's times 1000 plus the number of re-Acquires.
func reacquireNewToken(m *mutantStore) {
	bumps := map[string]uint64{}
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		if m.s.Inspect(name).Owner == c {
			bumps[name]++
		}
		return m.s.Acquire(ctx, name, c, ttl, tr)
	}
	m.tokenOut = func(name string, t uint64) uint64 { return t*1000 + bumps[name] }
	m.tokenIn = func(name string, t uint64) uint64 {
		if t%1000 == bumps[name] {
			return t / 1000
		}
		return t // an old token: matches no grant
	}
}

// counterRead: the token counter is read, not incremented: every grant of
// a lock gets the token of its first grant.
func counterRead(m *mutantStore) {
	first := map[string]uint64{}
	m.tokenOut = func(name string, t uint64) uint64 {
		if first[name] == 0 {
			first[name] = t
		}
		return first[name]
	}
	m.tokenIn = func(name string, t uint64) uint64 {
		if t == first[name] {
			if cur := m.s.Inspect(name); cur.Token != 0 {
				return cur.Token
			}
		}
		return t
	}
}

// reapedCounter: a lock's state (with its token counter) is deleted once
// it is free with nobody waiting, as a ZooKeeper container node is reaped,
// and tokens start again from 1 (a node's sequence number). memstore
// forgets such a state too, but only after its retention, and counts on
// from a store-wide high-water mark; the mutant deletes it at every
// Acquire that finds it so (also one memstore already forgot: Inspect then
// reports that mark as its counter) and forgets the mark.
func reapedCounter(m *mutantStore) {
	offset := map[string]uint64{}
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		if st := m.s.Inspect(name); st.Owner == "" && len(st.Queue) == 0 && st.Reserved == "" {
			offset[name] = st.Counter
		}
		return m.s.Acquire(ctx, name, c, ttl, tr)
	}
	m.tokenOut = func(name string, t uint64) uint64 {
		if t > offset[name] {
			return t - offset[name]
		}
		return t
	}
	m.tokenIn = func(name string, t uint64) uint64 { return t + offset[name] }
}

// renewAcquires: Renew is an Acquire: it ignores the token and re-acquires
// a lapsed grant.
func renewAcquires(m *mutantStore) {
	m.renew = func(ctx context.Context, name, c string, _ uint64, ttl, tr time.Duration) (lease.Record, error) {
		return m.s.Acquire(ctx, name, c, ttl, tr)
	}
}

// renewAnyToken: Renew checks the contender but not the token.
func renewAnyToken(m *mutantStore) {
	m.renew = func(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
		if cur := m.s.Inspect(name); cur.Owner == c {
			token = cur.Token
		}
		return m.s.Renew(ctx, name, c, token, ttl, tr)
	}
}

// lapsedRevived: a Renew after the grant lapsed, with nobody else holding
// the lock, claims it again under the old token (a node still there is
// written again).
func lapsedRevived(m *mutantStore) {
	type grant struct {
		c            string
		client, real uint64
	}
	last := map[string]grant{}    // the latest grant seen, by lock
	revived := map[string]grant{} // a revived grant: its old and new token
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		rec, err := m.s.Acquire(ctx, name, c, ttl, tr)
		if err == nil && rec.Held(c) {
			last[name] = grant{c, rec.Token, rec.Token}
		}
		return rec, err
	}
	m.renew = func(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
		rec, err := m.s.Renew(ctx, name, c, token, ttl, tr)
		if g := last[name]; errors.Is(err, lease.ErrNotHeld) && rec.OwnerID == "" && g.c == c && g.real == token {
			if again, aerr := m.s.Acquire(ctx, name, c, ttl, tr); aerr == nil && again.Held(c) {
				revived[name] = grant{c, token, again.Token}
				return again, nil
			}
		}
		return rec, err
	}
	m.tokenOut = func(name string, t uint64) uint64 {
		if g, ok := revived[name]; ok && g.real == t {
			return g.client
		}
		return t
	}
	m.tokenIn = func(name string, t uint64) uint64 {
		if g, ok := revived[name]; ok && g.client == t && held(m, name, g.c, g.real) {
			return g.real
		}
		return t
	}
}

// renewTTLOnly: Renew runs the grant for ttl from now, without the
// transition, yet reports ttl + transition (a Redis renew that sets the
// key's expiry to ttl).
func renewTTLOnly(m *mutantStore) {
	m.renew = func(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
		rec, err := m.s.Renew(ctx, name, c, token, ttl, 0)
		if err == nil {
			rec.Transition = rec.TTL + tr
		}
		return rec, err
	}
}

// renewNoExtend: Renew of the live grant answers success, with the record
// a renewal would have, but leaves the grant's end where it was.
func renewNoExtend(m *mutantStore) {
	m.renew = func(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
		if held(m, name, c, token) {
			rec, err := m.s.Get(ctx, name)
			rec.TTL, rec.Transition = ttl, ttl+tr
			return rec, err
		}
		return m.s.Renew(ctx, name, c, token, ttl, tr)
	}
}

// releaseKeepsGrant: the holder's Release reports success but leaves the
// grant to lapse.
func releaseKeepsGrant(m *mutantStore) {
	m.release = func(ctx context.Context, name, c string, token uint64) error {
		if token != 0 && held(m, name, c, token) {
			m.s.Release(ctx, name, c, 0) // leaves the queue only
			return nil
		}
		return m.s.Release(ctx, name, c, token)
	}
}

// releaseByAnyone: Release frees the lock whoever asks.
func releaseByAnyone(m *mutantStore) {
	m.release = func(ctx context.Context, name, c string, token uint64) error {
		if cur := m.s.Inspect(name); token != 0 && cur.Owner != "" {
			return m.s.Release(ctx, name, cur.Owner, cur.Token)
		}
		return m.s.Release(ctx, name, c, token)
	}
}

// releaseAnyToken: Release checks the contender but not the token.
func releaseAnyToken(m *mutantStore) {
	m.release = func(ctx context.Context, name, c string, token uint64) error {
		if cur := m.s.Inspect(name); token != 0 && cur.Owner == c {
			token = cur.Token
		}
		return m.s.Release(ctx, name, c, token)
	}
}

// releaseKeepsQueue: a Release that ends no grant (token 0 included)
// returns ErrNotHeld without withdrawing its contender from the queue.
func releaseKeepsQueue(m *mutantStore) {
	m.release = func(ctx context.Context, name, c string, token uint64) error {
		if token == 0 || !held(m, name, c, token) {
			return fmt.Errorf("mutant: release %q: %w", name, lease.ErrNotHeld)
		}
		return m.s.Release(ctx, name, c, token)
	}
}

// noWakeUp: no lease.Watcher; a release wakes nobody.
func noWakeUp(m *mutantStore) { m.noWatch = true }

// newestFirst: a losing Acquire puts a new waiter at the head of the
// queue, so a release hands the lock to the newest waiter.
func newestFirst(m *mutantStore) {
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		queued := m.s.Inspect(name).Queue
		rec, err := m.s.Acquire(ctx, name, c, ttl, tr)
		if err != nil || rec.Held(c) || contains(queued, c) {
			return rec, err
		}
		for _, w := range m.s.Inspect(name).Queue { // requeue everyone else behind c
			if w == c {
				continue
			}
			m.s.Release(ctx, name, w, 0)
			if again, err := m.s.Acquire(ctx, name, w, ttl, tr); err == nil && again.Held(w) {
				m.s.Release(ctx, name, w, again.Token) // never meant to be granted
			}
		}
		return rec, err
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// getExtends: Get of a held lock runs its grant for ttl + transition
// again (a read that rewrites the record).
func getExtends(m *mutantStore) {
	timings := map[string][2]time.Duration{}
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		timings[name] = [2]time.Duration{ttl, tr}
		return m.s.Acquire(ctx, name, c, ttl, tr)
	}
	m.get = func(ctx context.Context, name string) (lease.Record, error) {
		if cur := m.s.Inspect(name); cur.Owner != "" {
			t := timings[name]
			m.s.Renew(ctx, name, cur.Owner, cur.Token, t[0], t[1])
		}
		return m.s.Get(ctx, name)
	}
}

// caseFoldedNames: names are folded to lower case.
func caseFoldedNames(m *mutantStore) { m.name = strings.ToLower }

// namesCut: names are cut at 64 bytes.
func namesCut(m *mutantStore) { m.name = func(n string) string { return n[:min(len(n), 64)] } }

// idsCut: contender ids are cut at 64 bytes.
func idsCut(m *mutantStore) { m.id = func(c string) string { return c[:min(len(c), 64)] } }
