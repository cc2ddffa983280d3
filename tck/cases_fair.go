package tck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
)

// caseFairHandoff (a store that claims a fair queue, Harness.Fair): four
// Managers begin waiting one after another; each release hands the lock
// to the one that has waited longest, promptly, and a waiter that gave up
// in between is skipped at once. Skipped unless the harness claims
// fairness.
func caseFairHandoff(e *env) {
	if !e.h.Fair {
		e.t.Skip("tck: the harness does not claim a fair queue (Harness.Fair)")
	}
	const n = 4
	holder := e.newManager()
	name := e.name("fair")
	l := e.acquire(holder, name)
	ms, ts := make([]*lease.Manager, n), make([]*tap, n)
	type grant struct {
		i int
		acquired
	}
	grants := make(chan grant, n)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		ms[i], ts[i] = e.tappedManager()
		var ctx context.Context
		ctx, cancels[i] = context.WithCancel(e.ctx)
		defer cancels[i]()
		go func() {
			l, err := ms[i].Acquire(ctx, name)
			grants <- grant{i, acquired{l: l, err: err, at: time.Now()}}
		}()
		e.waitLost(ts[i], name, ms[i].ID()) // queued before the next one starts
	}
	const quitter = 2 // gives up before its turn
	cancels[quitter]()
	if r := recv(e, grants, e.prompt(), "the cancelled waiter"); r.i != quitter || !errors.Is(r.err, context.Canceled) {
		e.t.Fatalf("after waiter %d was cancelled, waiter %d returned %v, %v; want waiter %d with Canceled", quitter+1, r.i+1, r.l, r.err, quitter+1)
	}

	for i := range n {
		if i == quitter {
			continue
		}
		released := time.Now()
		e.release(l)
		r := recv(e, grants, e.takeover(), fmt.Sprintf("a waiter after release %d", i+1))
		if r.err != nil {
			e.t.Fatalf("waiter %d: %v", r.i+1, r.err)
		}
		if r.i != i {
			e.t.Fatalf("waiter %d was served before waiter %d, who had waited longer", r.i+1, i+1)
		}
		if d := r.at.Sub(released); d >= e.prompt() {
			e.t.Errorf("hand-off to waiter %d took %v, want < %v (ttl/2)", r.i+1, d, e.prompt())
		}
		l = r.l
	}
	e.release(l)
	// The cancelled waiter left nothing behind: the lock is free at once.
	time.Sleep(e.settle())
	if tl, err := holder.TryAcquire(e.ctx, name); err != nil {
		e.t.Errorf("TryAcquire after every waiter was served: %v, want the free lock", err)
	} else {
		e.release(tl)
	}
}
