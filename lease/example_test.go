package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

func ExampleManager_Acquire() {
	ctx := context.Background()
	store := memstore.New() // in-process; use a real backend across processes

	// Two Managers on one store are two contenders, as two processes are.
	alpha, err := lease.NewManager(store, lease.WithContenderID("alpha"),
		lease.WithTTL(10*time.Second), lease.WithTransition(6*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer alpha.Close(ctx)
	beta, err := lease.NewManager(store, lease.WithContenderID("beta"),
		lease.WithTTL(10*time.Second), lease.WithTransition(6*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer beta.Close(ctx)

	l, err := alpha.Acquire(ctx, "orders/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("alpha holds orders/42 with token", l.Token())

	// TryAcquire makes one attempt and does not wait.
	_, err = beta.TryAcquire(ctx, "orders/42")
	fmt.Println("beta not acquired:", errors.Is(err, lease.ErrNotAcquired))

	if err := l.Release(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("alpha released:", l.Err())

	// Every new grant gets a greater token.
	l2, err := beta.TryAcquire(ctx, "orders/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("beta holds orders/42 with token", l2.Token())
	_ = l2.Release(ctx)
	// Output:
	// alpha holds orders/42 with token 1
	// beta not acquired: true
	// alpha released: lease: released
	// beta holds orders/42 with token 2
}

func ExampleManager_Contend() {
	ctx := context.Background()
	m, err := lease.NewManager(memstore.New(), lease.WithContenderID("alpha"),
		lease.WithTTL(10*time.Second), lease.WithTransition(6*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close(ctx)

	leading := make(chan struct{})
	c, err := m.Contend("leader", lease.Callbacks{
		OnAcquired: func(ctx context.Context, l *lease.Lease) {
			fmt.Println("leading with token", l.Token())
			close(leading)
			// Do the leader's work until leadership ends.
			<-ctx.Done()
			fmt.Println("leadership ended:", context.Cause(ctx))
		},
		OnReleased: func(prev lease.Owner) {
			fmt.Printf("released: %s had token %d\n", prev.ID, prev.Token)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-leading
	// Stop ends the leader's work, waits for both callbacks, then releases.
	if err := c.Stop(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stopped")
	// Output:
	// leading with token 1
	// leadership ended: lease: released
	// released: alpha had token 1
	// stopped
}

func ExampleSchedule() {
	ctx := context.Background()
	m, err := lease.NewManager(memstore.New(), lease.WithContenderID("alpha"),
		lease.WithTTL(10*time.Second), lease.WithTransition(6*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close(ctx)

	// The work runs only on the leader: of all processes scheduling
	// "reports/nightly", one at a time.
	var runs atomic.Int32
	ranThrice := make(chan struct{})
	s, err := lease.Schedule(m, "reports/nightly", lease.FixedDelay(10*time.Millisecond),
		func(ctx context.Context) error {
			if runs.Add(1) == 3 {
				close(ranThrice)
			}
			return nil
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-ranThrice
	fmt.Println("ran 3 times")
	if err := s.Stop(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("running:", s.Running())
	// Output:
	// ran 3 times
	// running: false
}

func ExampleManager_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New()
	opts := []lease.Option{lease.WithTTL(10 * time.Second), lease.WithTransition(6 * time.Second)}
	observer, err := lease.NewManager(store, append(opts, lease.WithContenderID("observer"))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer observer.Close(ctx)
	alpha, err := lease.NewManager(store, append(opts, lease.WithContenderID("alpha"))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer alpha.Close(ctx)

	show := func(o lease.Owner) {
		if o.Free() {
			fmt.Println(o.Name, "is free")
			return
		}
		fmt.Printf("%s is owned by %s (token %d)\n", o.Name, o.ID, o.Token)
	}

	// Watch sends the current owner first, then every change.
	owners, err := observer.Watch(ctx, "jobs/nightly")
	if err != nil {
		fmt.Println(err)
		return
	}
	show(<-owners)

	l, err := alpha.Acquire(ctx, "jobs/nightly")
	if err != nil {
		fmt.Println(err)
		return
	}
	show(<-owners)

	if err := l.Release(ctx); err != nil {
		fmt.Println(err)
		return
	}
	show(<-owners)

	cancel() // ends the watch: the channel is closed
	for range owners {
	}
	// Output:
	// jobs/nightly is free
	// jobs/nightly is owned by alpha (token 1)
	// jobs/nightly is free
}

// The fencing token is what makes a lease safe against pauses: the
// resource remembers the highest token it has accepted and refuses lower
// ones. The lease's context stops a holder that knows it has lost the lease;
// the token stops one that does not know yet.
func ExampleLease_Context() {
	ctx := context.Background()
	store := memstore.New()
	opts := []lease.Option{lease.WithTTL(10 * time.Second), lease.WithTransition(6 * time.Second)}
	alpha, err := lease.NewManager(store, append(opts, lease.WithContenderID("alpha"))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer alpha.Close(ctx)
	beta, err := lease.NewManager(store, append(opts, lease.WithContenderID("beta"))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer beta.Close(ctx)

	// A fenced register, standing in for a database row or a file that
	// checks the token on every write.
	var (
		mu      sync.Mutex
		highest uint64
		value   string
	)
	write := func(ctx context.Context, token uint64, v string) error {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx) // the lease ended: do not even try
		}
		mu.Lock()
		defer mu.Unlock()
		if token < highest {
			return fmt.Errorf("stale token %d, already saw %d", token, highest)
		}
		highest, value = token, v
		return nil
	}

	la, err := alpha.Acquire(ctx, "config")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("alpha writes v1:", write(la.Context(), la.Token(), "v1"))
	staleToken := la.Token()
	if err := la.Release(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("alpha writes after release:", write(la.Context(), la.Token(), "v1b"))

	lb, err := beta.Acquire(ctx, "config")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("beta writes v2:", write(lb.Context(), lb.Token(), "v2"))

	// A holder paused (GC, SIGSTOP) since before beta's grant writes with
	// the token it still has: the register refuses it.
	fmt.Println("paused alpha writes:", write(context.Background(), staleToken, "v1c"))
	fmt.Println("value:", value)
	_ = lb.Release(ctx)
	// Output:
	// alpha writes v1: <nil>
	// alpha writes after release: lease: released
	// beta writes v2: <nil>
	// paused alpha writes: stale token 1, already saw 2
	// value: v2
}

func ExampleManager_Do() {
	ctx := context.Background()
	m, err := lease.NewManager(memstore.New(), lease.WithContenderID("billing-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close(ctx)

	// Do acquires, runs the function while the lease is held and releases
	// afterwards. The function's context ends if the lease is lost: stop
	// then, and pass the token to what you write, so a late write is fenced.
	err = m.Do(ctx, "invoices/2026-11", func(ctx context.Context, l *lease.Lease) error {
		fmt.Println("billing under token", l.Token())
		return ctx.Err()
	})
	fmt.Println("done:", err)
	// Output:
	// billing under token 1
	// done: <nil>
}
