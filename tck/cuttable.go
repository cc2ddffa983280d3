package tck

import (
	"context"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
)

// Cuttable wraps a client of an in-process store so that its traffic can be
// cut, for use as [Backend.Partitioned] where there is no connection for a
// proxy to black-hole.
//
// While the Partition is cut, every call of the returned client hangs until
// Heal: a call that has not reached s waits before it, one that s already
// answered withholds its reply (as when a reply is lost on the wire). A hung
// call ignores its context on purpose, as a real call on a black-holed
// connection can, so a Manager that waited on a store call to learn its
// lease was lost would fail the suite. On Heal the calls go on, reaching s
// late. Events of a Watch are dropped while cut.
//
// The returned client implements [lease.Watcher] and [lease.BatchRenewer]
// exactly when s does.
func Cuttable(s lease.Store) (lease.Store, Partition) {
	g := &gate{}
	return wrap(s, g, nil), g
}

// gate is a Partition: calls pass it freely unless it is cut.
type gate struct {
	mu  sync.Mutex
	cut chan struct{} // non-nil while cut; closed by Heal
}

// Cut implements Partition.
func (g *gate) Cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cut == nil {
		g.cut = make(chan struct{})
	}
}

// Heal implements Partition.
func (g *gate) Heal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cut != nil {
		close(g.cut)
		g.cut = nil
	}
}

// pass waits while the gate is cut.
func (g *gate) pass() {
	g.mu.Lock()
	c := g.cut
	g.mu.Unlock()
	if c != nil {
		<-c
	}
}

func (g *gate) isCut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cut != nil
}

// wrapper forwards the Store port through a gate and reports grants.
type wrapper struct {
	s       lease.Store
	g       *gate
	onGrant func(contender string, sent time.Time, rec lease.Record) // may be nil
}

// wrap returns w with exactly the optional capabilities of s.
func wrap(s lease.Store, g *gate, onGrant func(string, time.Time, lease.Record)) lease.Store {
	w := &wrapper{s: s, g: g, onGrant: onGrant}
	_, watch := s.(lease.Watcher)
	_, batch := s.(lease.BatchRenewer)
	switch {
	case watch && batch:
		return watchBatchWrapper{w}
	case watch:
		return watchWrapper{w}
	case batch:
		return batchWrapper{w}
	}
	return w
}

// Acquire implements lease.Store.
func (w *wrapper) Acquire(ctx context.Context, mutex, contender string, ttl, transition time.Duration) (lease.Record, error) {
	sent := time.Now()
	w.g.pass()
	rec, err := w.s.Acquire(ctx, mutex, contender, ttl, transition)
	w.g.pass()
	if err == nil && rec.Held(contender) && w.onGrant != nil {
		w.onGrant(contender, sent, rec)
	}
	return rec, err
}

// Renew implements lease.Store.
func (w *wrapper) Renew(ctx context.Context, mutex, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	w.g.pass()
	rec, err := w.s.Renew(ctx, mutex, contender, token, ttl, transition)
	w.g.pass()
	return rec, err
}

// Release implements lease.Store.
func (w *wrapper) Release(ctx context.Context, mutex, contender string, token uint64) error {
	w.g.pass()
	err := w.s.Release(ctx, mutex, contender, token)
	w.g.pass()
	return err
}

// Get implements lease.Store.
func (w *wrapper) Get(ctx context.Context, mutex string) (lease.Record, error) {
	w.g.pass()
	rec, err := w.s.Get(ctx, mutex)
	w.g.pass()
	return rec, err
}

// watch relays the events of the wrapped Watcher, dropping those that
// arrive while the gate is cut. The relay ends with ctx or the wrapped
// subscription.
func (w *wrapper) watch(ctx context.Context, mutex, contender string) (<-chan lease.Event, error) {
	w.g.pass()
	in, err := w.s.(lease.Watcher).Watch(ctx, mutex, contender)
	w.g.pass()
	if err != nil {
		return nil, err
	}
	out := make(chan lease.Event)
	go func() {
		defer close(out)
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				if w.g.isCut() {
					continue
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (w *wrapper) renewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	w.g.pass()
	res, err := w.s.(lease.BatchRenewer).RenewMany(ctx, reqs)
	w.g.pass()
	return res, err
}

type watchWrapper struct{ *wrapper }

// Watch implements lease.Watcher.
func (w watchWrapper) Watch(ctx context.Context, mutex, contender string) (<-chan lease.Event, error) {
	return w.watch(ctx, mutex, contender)
}

type batchWrapper struct{ *wrapper }

// RenewMany implements lease.BatchRenewer.
func (w batchWrapper) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	return w.renewMany(ctx, reqs)
}

type watchBatchWrapper struct{ *wrapper }

// Watch implements lease.Watcher.
func (w watchBatchWrapper) Watch(ctx context.Context, mutex, contender string) (<-chan lease.Event, error) {
	return w.watch(ctx, mutex, contender)
}

// RenewMany implements lease.BatchRenewer.
func (w watchBatchWrapper) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	return w.renewMany(ctx, reqs)
}

// grantLog records, per token, the earliest time an Acquire that returned
// that grant was sent: the grant cannot have been made on the server
// before then.
type grantLog struct {
	mu   sync.Mutex
	sent map[uint64]time.Time
}

// observed returns a client of s whose grants are recorded in a grantLog.
func observed(s lease.Store) (lease.Store, *grantLog) {
	gl := &grantLog{sent: make(map[uint64]time.Time)}
	return wrap(s, &gate{}, gl.record), gl
}

func (gl *grantLog) record(_ string, sent time.Time, rec lease.Record) {
	gl.mu.Lock()
	defer gl.mu.Unlock()
	if t, ok := gl.sent[rec.Token]; !ok || sent.Before(t) {
		gl.sent[rec.Token] = sent
	}
}

// sentAt returns when the first Acquire that returned the grant with token
// was sent.
func (gl *grantLog) sentAt(token uint64) (time.Time, bool) {
	gl.mu.Lock()
	defer gl.mu.Unlock()
	t, ok := gl.sent[token]
	return t, ok
}
