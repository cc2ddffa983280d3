package tck_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// Store mistakes are planted in front of memstore: a mutant is memstore
// behind the Store port with one operation replaced. Calls are serialized
// by the mutant's lock, so a mistake that takes several memstore calls to
// emulate stays one atomic step, and inside a synctest bubble no time
// passes during it. A mutant never offers RenewMany, so every renewal of a
// Manager reaches its Renew.

// mutantStore is memstore with planted mistakes.
type mutantStore struct {
	s  *memstore.Store
	mu sync.Mutex

	// name and id map names and contender ids on their way to memstore
	// (nil: unchanged); ids are mapped back in records.
	name, id func(string) string
	ids      map[string]string // mapped id -> the id a client sent

	// The operations on memstore, with names, ids and tokens as memstore
	// knows them (nil: memstore's own).
	acquire func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error)
	renew   func(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error)
	release func(ctx context.Context, name, c string, token uint64) error
	get     func(ctx context.Context, name string) (lease.Record, error)

	// tokenOut and tokenIn map tokens between memstore and clients (nil:
	// unchanged).
	tokenOut func(name string, token uint64) uint64
	tokenIn  func(name string, token uint64) uint64

	noWatch bool // no lease.Watcher: waiters only poll
}

func newMutantStore(s *memstore.Store) *mutantStore {
	return &mutantStore{s: s, ids: make(map[string]string)}
}

// store returns m as a client, a lease.Watcher unless noWatch.
func (m *mutantStore) store() lease.Store {
	if m.noWatch {
		return storeOnly{m}
	}
	return m
}

type storeOnly struct{ lease.Store }

func (m *mutantStore) mapName(name string) string {
	if m.name == nil {
		return name
	}
	return m.name(name)
}

func (m *mutantStore) mapID(c string) string {
	if m.id == nil || c == "" {
		return c
	}
	mc := m.id(c)
	m.ids[mc] = c
	return mc
}

// out maps a record from memstore back to what a client sees.
func (m *mutantStore) out(name string, rec lease.Record) lease.Record {
	if c, ok := m.ids[rec.Owner]; ok {
		rec.Owner = c
	}
	if m.tokenOut != nil && rec.Token != 0 {
		rec.Token = m.tokenOut(name, rec.Token)
	}
	return rec
}

func (m *mutantStore) in(name string, token uint64) uint64 {
	if m.tokenIn == nil || token == 0 {
		return token
	}
	return m.tokenIn(name, token)
}

// Acquire implements lease.Store.
func (m *mutantStore) Acquire(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, mc := m.mapName(name), m.mapID(c)
	f := m.s.Acquire
	if m.acquire != nil {
		f = m.acquire
	}
	rec, err := f(ctx, n, mc, ttl, tr)
	return m.out(n, rec), err
}

// Renew implements lease.Store.
func (m *mutantStore) Renew(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, mc := m.mapName(name), m.mapID(c)
	f := m.s.Renew
	if m.renew != nil {
		f = m.renew
	}
	rec, err := f(ctx, n, mc, m.in(n, token), ttl, tr)
	return m.out(n, rec), err
}

// Release implements lease.Store.
func (m *mutantStore) Release(ctx context.Context, name, c string, token uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, mc := m.mapName(name), m.mapID(c)
	f := m.s.Release
	if m.release != nil {
		f = m.release
	}
	return f(ctx, n, mc, m.in(n, token))
}

// Get implements lease.Store.
func (m *mutantStore) Get(ctx context.Context, name string) (lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.mapName(name)
	f := m.s.Get
	if m.get != nil {
		f = m.get
	}
	rec, err := f(ctx, n)
	return m.out(n, rec), err
}

// Watch implements lease.Watcher.
func (m *mutantStore) Watch(ctx context.Context, name, c string) (<-chan lease.Event, error) {
	m.mu.Lock()
	n, mc := m.mapName(name), m.mapID(c)
	m.mu.Unlock()
	return m.s.Watch(ctx, n, mc)
}

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

// firstAcquireLoses: the first Acquire of a mutex the store never saw
// creates its state and reports the mutex free instead of granting it.
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

// earlyTakeover: another contender may take the mutex once its ttl ended,
// in the holder's transition.
func earlyTakeover(m *mutantStore) {
	m.acquire = func(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
		if cur, err := m.s.Get(ctx, name); err == nil && cur.Owner != "" && cur.Owner != c && cur.TTL == 0 {
			m.s.Release(ctx, name, cur.Owner, cur.Token)
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
// a mutex gets the token of its first grant.
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

// reapedCounter: a mutex's state (with its token counter) is deleted once
// it is free with nobody waiting, as a ZooKeeper container node is reaped,
// and tokens start again from 1 (a node's sequence number).
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
// the mutex, claims it again under the old token (a node still there is
// written again).
func lapsedRevived(m *mutantStore) {
	type grant struct {
		c            string
		client, real uint64
	}
	last := map[string]grant{}    // the latest grant seen, by mutex
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
		if g := last[name]; errors.Is(err, lease.ErrNotHeld) && rec.Owner == "" && g.c == c && g.real == token {
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

// releaseByAnyone: Release frees the mutex whoever asks.
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
// queue, so a release hands the mutex to the newest waiter.
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

// getExtends: Get of a held mutex runs its grant for ttl + transition
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
