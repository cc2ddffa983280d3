package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// A unit test of code that takes a lease: memstore keeps the whole Store
// contract in memory, so the code under test runs exactly as it would on a
// real backend, without a server. Two Managers on one Store behave as two
// processes sharing a server.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	a, err := lease.NewManager(store, lease.WithTTL(2*time.Second), lease.WithTransition(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := lease.NewManager(store, lease.WithTTL(2*time.Second), lease.WithTransition(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(ctx)

	first, err := a.Acquire(ctx, "payments/settle")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, "payments/settle")
	fmt.Println("b while a holds:", errors.Is(err, lease.ErrNotAcquired))

	if err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	second, err := b.TryAcquire(ctx, "payments/settle")
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("tokens grow:", second.Token() > first.Token())
	// Output:
	// b while a holds: true
	// tokens grow: true
}

// Store.StepClock moves the store's server clock, as a server clock step
// would, so that a test can watch a held lease end without waiting for it.
func ExampleStore_StepClock() {
	ctx := context.Background()
	store := memstore.New()
	m, err := lease.NewManager(store, lease.WithTTL(2*time.Second), lease.WithTransition(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	l, err := m.Acquire(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	store.StepClock(time.Hour) // every grant the store made is now long over
	<-l.Done()
	fmt.Println("lost:", l.Err() != nil)
	// Output:
	// lost: true
}
