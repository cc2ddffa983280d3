package faultproxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
)

// TestRealClient drives go-redis through the proxy to a real Redis.
func TestRealClient(t *testing.T) {
	t.Parallel()
	srv := testserver.PrivateRedis(t)
	p := newProxy(t, srv.Addr())
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: short, WriteTimeout: short})
	defer c.Close()
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer direct.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	proxied := func() int { // connections Redis sees from the proxy
		list, err := direct.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, "cmd=") - 1 // minus CLIENT LIST's own
	}

	idle := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1})
	defer idle.Close()
	if err := idle.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// Black hole: the request times out, and Redis keeps both connections
	// open after their clients closed them (FINs are swallowed too, also
	// on the idle connection with nothing in flight): half-open
	// connections. Heal delivers the FINs.
	p.Blackhole()
	if err := c.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("GET through a black hole: %v, want a timeout", err)
	}
	_ = c.Close()
	_ = idle.Close()
	time.Sleep(50 * time.Millisecond)
	if n := proxied(); n != 2 {
		t.Fatalf("Redis sees %d proxied connections during the black hole, want 2 (half-open)", n)
	}
	p.Heal()
	deadline := time.Now().Add(5 * time.Second)
	for proxied() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Redis still sees the closed connections after Heal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c = redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: short, WriteTimeout: short})
	defer c.Close()
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET after Heal: %q, %v", v, err)
	}

	// Delay: each round trip takes at least twice the delay.
	const d = 100 * time.Millisecond
	p.Delay(d)
	c2 := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 5 * time.Second})
	defer c2.Close()
	_ = c2.Ping(ctx).Err() // connect (and HELLO) outside the measurement
	begin := time.Now()
	if err := c2.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(begin); rtt < 2*d {
		t.Fatalf("PING with delay %v took %v", d, rtt)
	}
	p.Heal()

	// Cut: the pooled connection is reset; after Heal a new one serves.
	p.Cut()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a cut connection succeeded")
	}
	p.Heal()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Heal: %v", err)
	}
}
