package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A Manager contends for mutexes on one store under one contender id. Use
// one Manager per store per process. Goroutines that want the same mutex
// through one Manager share one store contender and queue locally, in
// order; two Managers are two contenders, exactly as two processes are.
//
// A Manager is safe for concurrent use. Close it to release everything it
// holds.
type Manager struct {
	store   Store
	watcher Watcher // nil when the store cannot push
	batch   *batcher
	cfg     config
	started time.Time // anchor of the renewal grid

	closing chan struct{} // closed by Close
	wg      sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	slots      map[string]*slot
	contenders map[*Contender]struct{}
	// abandonedUntil holds, per mutex, when a grant whose Stop gave up on
	// its callbacks has surely lapsed on the server.
	abandonedUntil map[string]time.Time
	// unreleased holds, per mutex, a token of ours that the store may still
	// grant us but that must never be handed out again (its holder was
	// told the lease ended, and releasing it failed), and until when it
	// could still be live.
	unreleased map[string]unreleasedGrant
	// sweepAt is the number of abandoned and unreleased entries at which
	// the expired ones are swept next, and swept when they last were: both
	// maps stay bounded by the names used within about ttl + transition,
	// even names never used again.
	sweepAt int
	swept   time.Time
}

// unreleasedGrant is an entry of Manager.unreleased.
type unreleasedGrant struct {
	token uint64
	until time.Time
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
	m := &Manager{
		store:      store,
		cfg:        cfg,
		started:    cfg.clock.Now(),
		closing:    make(chan struct{}),
		slots:      make(map[string]*slot),
		contenders: make(map[*Contender]struct{}),

		abandonedUntil: make(map[string]time.Time),
		unreleased:     make(map[string]unreleasedGrant),
	}
	m.watcher, _ = store.(Watcher)
	if br, ok := store.(BatchRenewer); ok {
		m.batch = &batcher{m: m, store: br, reqs: make(chan batchItem)}
	}
	return m, nil
}

// ID returns the contender id under which this Manager holds mutexes.
func (m *Manager) ID() string { return m.cfg.id }

// Acquire blocks until this Manager holds the mutex name for the caller,
// then returns the held Lease. Waiters of one Manager are served in order.
//
// When ctx ends first, Acquire returns an error that wraps both
// [ErrNotAcquired] and ctx.Err(). After Close it returns [ErrClosed].
func (m *Manager) Acquire(ctx context.Context, name string) (*Lease, error) {
	return m.claimLease(ctx, name, claimAcquire)
}

// TryAcquire makes one attempt to acquire the mutex name. When someone
// else holds it (another process, or another goroutine of this Manager, or
// when goroutines of this Manager already wait for it), it returns an error
// wrapping [ErrNotAcquired]. Other errors mean the store could not be asked;
// the outcome is then cleaned up in the background.
func (m *Manager) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return m.claimLease(ctx, name, claimTry)
}

func (m *Manager) claimLease(ctx context.Context, name string, kind claimKind) (*Lease, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(ErrNotAcquired, err)
	}
	c := newClaim(kind)
	s, err := m.enqueue(name, c)
	if err != nil {
		return nil, err
	}
	select {
	case l := <-c.lease:
		return l, nil
	case err := <-c.fail:
		return nil, err
	case <-ctx.Done():
	}
	if s.cancel(c) {
		return nil, errors.Join(ErrNotAcquired, ctx.Err())
	}
	// Granted (or failed) at the same moment: give a grant straight back.
	select {
	case l := <-c.lease:
		l.end(context.Background(), endRequest{release: true})
	case <-c.fail:
	}
	return nil, errors.Join(ErrNotAcquired, ctx.Err())
}

// enqueue adds c to the local queue of name, starting that mutex's
// contend goroutine if needed.
func (m *Manager) enqueue(name string, c *claim) (*slot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	m.sweep()
	s := m.slots[name]
	if s == nil {
		s = newSlot(m, name)
		m.slots[name] = s
		m.wg.Add(1)
		go s.run()
	}
	if !s.add(c) {
		return nil, fmt.Errorf("%w: %q is held or awaited by this manager", ErrNotAcquired, name)
	}
	return s, nil
}

// retire removes s from the registry if no claim arrived meanwhile.
func (m *Manager) retire(s *slot) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !s.retire() {
		return false
	}
	delete(m.slots, s.name)
	return true
}

// Get returns the current owner of the mutex name as the store reports it.
// After Close it returns [ErrClosed].
func (m *Manager) Get(ctx context.Context, name string) (Owner, error) {
	if err := ValidateName(name); err != nil {
		return Owner{}, err
	}
	if ctx == nil {
		return Owner{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return Owner{}, ErrClosed
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.callTimeout)
	defer cancel()
	rec, err := m.store.Get(cctx, name)
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
// [Contender.Stop] from a callback is, and its mutex is released once the
// callback returns.
func (m *Manager) Close(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	m.mu.Lock()
	first := !m.closed
	m.closed = true
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
	if inside {
		return errors.Join(errs...) // our own goroutine would never end
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("lease: close: %w", ctx.Err()))
	}
	return errors.Join(errs...)
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
	delete(m.contenders, c)
	m.mu.Unlock()
}

// notifyOwner tells the Contenders of name who owns it now.
func (m *Manager) notifyOwner(o Owner) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.contenders {
		if c.name == o.Mutex {
			c.setOwner(o)
		}
	}
}

// abandon records that the grant of name must be left to lapse until then.
func (m *Manager) abandon(name string, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.abandonedUntil[name] = until
	m.sweep()
}

// sweep drops the expired abandoned and unreleased entries once their
// number has doubled since the last sweep, or ttl + transition after it
// (when every entry then present has expired): amortized, each entry
// added pays for one entry checked. m.mu is held.
func (m *Manager) sweep() {
	n := len(m.abandonedUntil) + len(m.unreleased)
	if n == 0 {
		return
	}
	now := m.cfg.clock.Now()
	if n < m.sweepAt && now.Sub(m.swept) < m.cfg.ttl+m.cfg.transition {
		return
	}
	m.swept = now
	for name, until := range m.abandonedUntil {
		if !now.Before(until) {
			delete(m.abandonedUntil, name)
		}
	}
	for name, g := range m.unreleased {
		if !now.Before(g.until) {
			delete(m.unreleased, name)
		}
	}
	m.sweepAt = max(2*(len(m.abandonedUntil)+len(m.unreleased)), 64)
}

// abandoned returns how long attempts on name must still wait for an
// abandoned grant to lapse (0: none).
func (m *Manager) abandoned(name string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.abandonedUntil[name]
	if !ok {
		return 0
	}
	if d := until.Sub(m.cfg.clock.Now()); d > 0 {
		return d
	}
	delete(m.abandonedUntil, name)
	return 0
}

// keepRefusing records that token of name could not be released: a later
// slot of name must give it up instead of handing it out. The record ends
// once the grant has surely lapsed on the server.
func (m *Manager) keepRefusing(name string, token uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unreleased[name] = unreleasedGrant{token, m.cfg.clock.Now().Add(m.cfg.ttl + m.cfg.transition)}
	m.sweep()
}

// refused returns (and forgets) the token of name that keepRefusing
// recorded, 0 when none is still live.
func (m *Manager) refused(name string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.unreleased[name]
	delete(m.unreleased, name)
	if !ok || !m.cfg.clock.Now().Before(g.until) {
		return 0
	}
	return g.token
}
