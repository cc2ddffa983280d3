package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// A Manager contends for locks on one store under one contender id. Use
// one Manager per store per process. Goroutines that want the same lock
// through one Manager share one store contender and queue locally, in
// order; two Managers are two contenders, exactly as two processes are.
//
// An uncontended Acquire and Release run in the caller's goroutine; a held
// lease needs no goroutine of its own (one goroutine renews all of a
// Manager's leases and watches their deadlines).
//
// A Manager is safe for concurrent use. Close it to release everything it
// holds.
type Manager struct {
	store   Store
	watcher Watcher      // nil when the store cannot push
	batch   BatchRenewer // nil when the store renews one grant per call
	cfg     config
	started time.Time // anchor of the renewal grid
	timers  timers
	calls   callTimer // the deadlines of store calls

	closing chan struct{} // closed by Close
	wg      sync.WaitGroup

	// life guards closed. Whoever starts a goroutine from outside the
	// Manager's goroutines checks closed and adds to wg under its read
	// lock, so that no Add can race Close's Wait.
	life   sync.RWMutex
	closed bool

	// The slots, sharded by name so that callers on different locks
	// rarely meet on a lock.
	seed   maphash.Seed
	shards [slotShards]shard

	ncontenders atomic.Int32 // len(contenders), read without mu

	mu         sync.Mutex
	contenders map[*Contender]struct{}

	refusals // abandoned and unreleased grants

	obs    metrics     // instruments; all no-ops without a MeterProvider
	health storeHealth // whether the store answers, for HealthCheck
}

// slotShards is the number of shards of a Manager's slot registry.
const slotShards = 32

// shard is one part of the slot registry.
type shard struct {
	mu    sync.Mutex
	slots map[string]*slot

	released     [releasedWays]releasedToken // see released.go
	nextReleased int                         // the entry to evict next
}

// shardOf returns the registry shard of name.
func (m *Manager) shardOf(name string) *shard {
	return &m.shards[maphash.String(m.seed, name)%slotShards]
}

// NewManager returns a Manager for store. It starts no goroutine until it
// is used. Options are validated; an invalid one, or a nil store, makes it
// fail with an error wrapping [ErrInvalidArgument]. So does a store that
// reports a grant limit ([GrantLimiter]) that leaves nothing after the
// safety margin.
func NewManager(store Store, opts ...Option) (*Manager, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidArgument)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if gl, ok := store.(GrantLimiter); ok {
		if limit := gl.MaxGrant(); limit > 0 && limit <= cfg.safety {
			return nil, fmt.Errorf("%w: the store grants at most %v, which leaves nothing after the safety margin %v "+
				"(ttl %v + transition %v); lower ttl and transition, or raise the store's limit",
				ErrInvalidArgument, limit, cfg.safety, cfg.ttl, cfg.transition)
		}
	}
	obs, err := newMetrics(&cfg)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		obs:        obs,
		store:      store,
		cfg:        cfg,
		started:    cfg.clock.Now(),
		closing:    make(chan struct{}),
		seed:       maphash.MakeSeed(),
		contenders: make(map[*Contender]struct{}),
		refusals: refusals{
			abandonedUntil: make(map[string]time.Time),
			unreleased:     make(map[string]unreleasedGrant),
		},
	}
	for i := range m.shards {
		m.shards[i].slots = make(map[string]*slot)
	}
	m.timers = timers{m: m, wake: make(chan struct{}, 1)}
	m.watcher, _ = store.(Watcher)
	m.batch, _ = store.(BatchRenewer)
	return m, nil
}

// ID returns the contender id under which this Manager holds locks.
func (m *Manager) ID() string { return m.cfg.id }

// Get returns the current owner of the lock name as the store reports it.
// After Close it returns [ErrClosed].
func (m *Manager) Get(ctx context.Context, name string) (Owner, error) {
	if err := ValidateName(name); err != nil {
		return Owner{}, err
	}
	if ctx == nil {
		return Owner{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	m.life.RLock()
	closed := m.closed
	m.life.RUnlock()
	if closed {
		return Owner{}, ErrClosed
	}
	var rec Record
	err := m.call(ctx, opGet, func(ctx context.Context) (err error) {
		rec, err = m.store.Get(ctx, name)
		return err
	})
	if err != nil {
		return Owner{}, fmt.Errorf("lease: get %q: %w", name, err)
	}
	return ownerOf(name, rec), nil
}

// Close stops every Contender and Scheduler of this Manager (waiting for
// their callbacks, bounded by ctx), releases every lease it holds, fails
// waiting Acquire calls with [ErrClosed], ends Watch channels, and waits
// for its goroutines to end. Close is idempotent.
//
// Called from inside a callback of one of its Contenders (or a
// Scheduler's work), Close does all of that except waiting for that
// callback and the goroutines that serve it: its Contender is stopped as
// [Contender.Stop] from a callback is, and its lock is released once the
// callback returns.
func (m *Manager) Close(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	m.life.Lock()
	first := !m.closed
	m.closed = true
	m.life.Unlock()
	m.mu.Lock()
	cs := make([]*Contender, 0, len(m.contenders))
	for c := range m.contenders {
		cs = append(cs, c)
	}
	m.mu.Unlock()
	g, inside := goid(), false
	for _, c := range cs {
		inside = inside || c.inside(g)
	}
	var errs []error
	for _, c := range cs {
		if err := c.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if first {
		close(m.closing)
	}
	// Contenders were stopped first; what remains are plain leases, and
	// draining ones whose Contender releases them once its callbacks
	// return (a Close from inside a callback).
	var releases sync.WaitGroup
	for _, l := range m.heldLeases() {
		releases.Go(func() { _ = l.stop(context.Background()) })
	}
	if inside {
		return errors.Join(errs...) // our own goroutine would never end
	}
	done := make(chan struct{})
	go func() { releases.Wait(); m.wg.Wait(); close(done) }()
	select {
	case <-done:
		m.calls.idle()
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("lease: close: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// heldLeases returns the leases held and not draining.
func (m *Manager) heldLeases() []*Lease {
	var ls []*Lease
	m.eachLease(func(l *Lease) {
		if l.state == leaseHeld {
			ls = append(ls, l)
		}
	})
	return ls
}

// eachLease calls f with every lease of the slots, under the locks of its
// shard, its slot and itself.
func (m *Manager) eachLease(f func(*Lease)) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for _, s := range sh.slots {
			s.mu.Lock()
			if l := s.lease; l != nil {
				l.mu.Lock()
				f(l)
				l.mu.Unlock()
			}
			s.mu.Unlock()
		}
		sh.mu.Unlock()
	}
}

// isClosing reports whether Close has begun ending goroutines.
func (m *Manager) isClosing() bool {
	select {
	case <-m.closing:
		return true
	default:
		return false
	}
}

// forget removes a stopped Contender.
func (m *Manager) forget(c *Contender) {
	m.mu.Lock()
	if _, ok := m.contenders[c]; ok {
		delete(m.contenders, c)
		m.ncontenders.Add(-1)
	}
	m.mu.Unlock()
}

// notifyOwner tells the Contenders of name who owns it now.
func (m *Manager) notifyOwner(o Owner) {
	if m.ncontenders.Load() == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.contenders {
		if c.name == o.Name {
			c.setOwner(o)
		}
	}
}
