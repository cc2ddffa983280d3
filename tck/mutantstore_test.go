package tck_test

import (
	"context"
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
	if c, ok := m.ids[rec.OwnerID]; ok {
		rec.OwnerID = c
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
