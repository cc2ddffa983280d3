package redisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// redisAddr is the server of the example (in an application, yours).
const redisAddr = "localhost:6379"

// A Store over the go-redis client an application already has. The Store
// never closes the client; Close ends the Store's own subscriptions.
// (Compiled, not run by go test: it needs a Redis at redisAddr.)
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  redisAddr,
		ContextTimeoutEnabled: true, // calls end with the lease's per-call timeouts
	})
	defer rdb.Close()

	store, err := redisstore.New(rdb, redisstore.WithKeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	m, err := lease.NewManager(store, lease.WithContenderID("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)

	l, err := m.Acquire(ctx, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	// Work under l.Context(), which ends if the lease is lost, and hand
	// l.Token() to the resource so it can reject a stale holder.
	fmt.Println("held by", l.Owner().ID, "with a token:", l.Token() > 0)
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	o, err := m.Get(ctx, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("free after release:", o.Free())
}
