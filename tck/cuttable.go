package tck

import (
	"context"
	"fmt"
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
	t := newTap(s)
	t.logging = false
	return t.client(), t
}

// client returns the tap as a Store with exactly the optional capabilities
// of the wrapped client.
func (t *tap) client() lease.Store {
	_, watch := t.s.(lease.Watcher)
	_, batch := t.s.(lease.BatchRenewer)
	switch {
	case watch && batch:
		return watchBatchClient{t}
	case watch:
		return watchClient{t}
	case batch:
		return batchClient{t}
	}
	return t
}

// Acquire implements lease.Store.
func (t *tap) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	return t.do(ctx, call{op: opAcquire, mutex: name, contender: contender}, func(ctx context.Context) (lease.Record, error) {
		return t.s.Acquire(ctx, name, contender, ttl, transition)
	})
}

// Renew implements lease.Store.
func (t *tap) Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	return t.do(ctx, call{op: opRenew, mutex: name, contender: contender, token: token}, func(ctx context.Context) (lease.Record, error) {
		return t.s.Renew(ctx, name, contender, token, ttl, transition)
	})
}

// Release implements lease.Store.
func (t *tap) Release(ctx context.Context, name, contender string, token uint64) error {
	_, err := t.do(ctx, call{op: opRelease, mutex: name, contender: contender, token: token}, func(ctx context.Context) (lease.Record, error) {
		return lease.Record{}, t.s.Release(ctx, name, contender, token)
	})
	return err
}

// Get implements lease.Store.
func (t *tap) Get(ctx context.Context, name string) (lease.Record, error) {
	return t.do(ctx, call{op: opGet, mutex: name}, func(ctx context.Context) (lease.Record, error) {
		return t.s.Get(ctx, name)
	})
}

// watch relays the events of the wrapped Watcher, dropping those that
// arrive while the tap is cut. The relay ends with ctx or the wrapped
// subscription.
func (t *tap) watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	if err := t.pass(ctx); err != nil {
		return nil, err
	}
	in, err := t.s.(lease.Watcher).Watch(ctx, name, contender)
	if perr := t.pass(ctx); perr != nil {
		return nil, perr
	}
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
				if t.isCut() {
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

// renewMany sends a batch as one call; each request is logged as a Renew
// and passes the triggers and hooks on its own.
func (t *tap) renewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	calls := make([]call, len(reqs))
	for i, r := range reqs {
		calls[i] = call{op: opRenew, mutex: r.Name, contender: r.Contender, token: r.Token, sent: time.Now()}
		t.sending(&calls[i])
	}
	fail := func(err error) ([]lease.RenewResult, error) {
		for _, c := range calls {
			t.done(c, lease.Record{}, err, false)
		}
		return nil, err
	}
	if err := t.pass(ctx); err != nil {
		return fail(err)
	}
	// A cut-off call finishes in the background (run), after this
	// function has returned: its results go through mu, and only a call
	// that run waited for hands them on.
	var (
		mu  sync.Mutex
		got []lease.RenewResult
	)
	_, err := t.run(ctx, func(ctx context.Context) (lease.Record, error) {
		r, err := t.s.(lease.BatchRenewer).RenewMany(ctx, reqs)
		mu.Lock()
		got = r
		mu.Unlock()
		return lease.Record{}, err
	})
	var res []lease.RenewResult
	if err == nil {
		mu.Lock()
		res = got
		mu.Unlock()
	}
	if werr := t.wait(ctx, opRenew); werr != nil {
		return fail(werr)
	}
	if perr := t.pass(ctx); perr != nil {
		return fail(perr)
	}
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("tck: RenewMany returned %d results for %d requests", len(res), len(reqs))
	}
	if err != nil {
		for _, c := range calls {
			t.done(c, lease.Record{}, err, true)
		}
		return nil, err
	}
	for i, c := range calls {
		t.done(c, res[i].Record, res[i].Err, true)
	}
	return res, nil
}

type watchClient struct{ *tap }

// Watch implements lease.Watcher.
func (c watchClient) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	return c.watch(ctx, name, contender)
}

type batchClient struct{ *tap }

// RenewMany implements lease.BatchRenewer.
func (c batchClient) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	return c.renewMany(ctx, reqs)
}

type watchBatchClient struct{ *tap }

// Watch implements lease.Watcher.
func (c watchBatchClient) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	return c.watch(ctx, name, contender)
}

// RenewMany implements lease.BatchRenewer.
func (c watchBatchClient) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	return c.renewMany(ctx, reqs)
}
