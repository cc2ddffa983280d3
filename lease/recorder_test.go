package lease_test

import (
	"context"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// call is one store call as a recorder saw it, on the (fake) clock.
type call struct {
	op        string
	contender string
	at        time.Time
	rec       lease.Record
	err       error
}

// recorder wraps a memstore and records every call with its time. It
// passes Watch through; RenewMany only when batch is set.
type recorder struct {
	*memstore.Store
	mu    sync.Mutex
	calls []call
}

func newRecorder(opts ...memstore.Option) *recorder {
	return &recorder{Store: memstore.New(opts...)}
}

func (r *recorder) add(c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// of returns the recorded calls of one op and contender ("" = any).
func (r *recorder) of(op, contender string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.op == op && (contender == "" || c.contender == contender) {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	at := time.Now()
	rec, err := r.Store.Acquire(ctx, name, contender, ttl, transition)
	r.add(call{op: "acquire", contender: contender, at: at, rec: rec, err: err})
	return rec, err
}

func (r *recorder) Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	at := time.Now()
	r.add(call{op: "renew-sent", contender: contender, at: at})
	rec, err := r.Store.Renew(ctx, name, contender, token, ttl, transition)
	r.add(call{op: "renew", contender: contender, at: at, rec: rec, err: err})
	return rec, err
}

func (r *recorder) Release(ctx context.Context, name, contender string, token uint64) error {
	at := time.Now()
	err := r.Store.Release(ctx, name, contender, token)
	r.add(call{op: "release", contender: contender, at: at, rec: lease.Record{Token: token}, err: err})
	return err
}

// noBatch hides BatchRenewer but keeps Watcher.
type noBatch struct {
	lease.Store
	lease.Watcher
}

func watching(r *recorder) lease.Store { return noBatch{Store: r, Watcher: r} }
