package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
)

// TestPinnedNeverRedials: the connection the acquire script is loaded over
// fails once it broke, instead of dialing again (maybe into a new server
// life), so INFO and SCRIPT LOAD always reach the same life.
func TestPinnedNeverRedials(t *testing.T) {
	srv := testserver.PrivateRedis(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	conn, done := pinned(c)
	defer done()
	if err := conn.ClientSetName(ctx, "pinned").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ClientKillByFilter(ctx, "SKIPME", "yes", "TYPE", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := conn.Ping(ctx).Err(); err == nil {
			t.Fatal("PING answered over a connection that was killed")
		}
	}
	if n, err := c.Do(ctx, "CLIENT", "LIST").Text(); err != nil || strings.Contains(n, "name=pinned") {
		t.Fatalf("CLIENT LIST after the kill: %q, %v; want no pinned connection", n, err)
	}
}
