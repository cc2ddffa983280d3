package lease

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// batchWindow is how long the batcher collects renewals after the first
// one before sending them. Renewals of one Manager are aligned on a grid
// (see renewAt), so the ones due together arrive within this window.
const batchWindow = time.Millisecond

// batcher sends the renewals of one Manager through BatchRenewer.RenewMany,
// one round trip for all renewals due at the same time. Its goroutine
// starts with the first renewal and ends when the Manager closes.
type batcher struct {
	m     *Manager
	store BatchRenewer
	reqs  chan batchItem
	once  sync.Once
}

type batchItem struct {
	req RenewRequest
	res chan RenewResult // buffered
}

// renew queues req for the next batch and waits for its result.
func (b *batcher) renew(ctx context.Context, req RenewRequest) (Record, error) {
	b.once.Do(func() {
		b.m.wg.Add(1)
		go b.run()
	})
	it := batchItem{req: req, res: make(chan RenewResult, 1)}
	select {
	case b.reqs <- it:
	case <-ctx.Done():
		return Record{}, ctx.Err()
	case <-b.m.closing:
		return Record{}, ErrClosed
	}
	select {
	case r := <-it.res:
		return r.Record, r.Err
	case <-ctx.Done():
		return Record{}, ctx.Err()
	}
}

func (b *batcher) run() {
	defer b.m.wg.Done()
	for {
		select {
		case first := <-b.reqs:
			b.flush(b.collect(first))
		case <-b.m.closing:
			return
		}
	}
}

func (b *batcher) collect(first batchItem) []batchItem {
	items := []batchItem{first}
	t := b.m.cfg.clock.NewTimer(batchWindow)
	defer t.Stop()
	for {
		select {
		case it := <-b.reqs:
			items = append(items, it)
		case <-t.C():
			return items
		}
	}
}

func (b *batcher) flush(items []batchItem) {
	m := b.m
	reqs := make([]RenewRequest, len(items))
	for i, it := range items {
		reqs[i] = it.req
	}
	var results []RenewResult
	err := m.call(context.Background(), func(ctx context.Context) (err error) {
		results, err = b.store.RenewMany(ctx, reqs)
		return err
	})
	if err == nil && len(results) != len(items) {
		err = fmt.Errorf("lease: store returned %d results for %d renewals", len(results), len(items))
	}
	for i, it := range items {
		if err != nil {
			it.res <- RenewResult{Err: err}
			continue
		}
		it.res <- results[i]
	}
}
