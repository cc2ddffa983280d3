package testserver_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
)

const slots = 16384

// keySlot is Redis Cluster's HASH_SLOT for keys without a hash tag:
// CRC16-XMODEM mod 16384.
func keySlot(key string) int {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slots
}

// keyPerSlot returns one key under prefix for each of the 16384 slots.
func keyPerSlot(prefix string) []string {
	keys := make([]string, slots)
	found := 0
	for n := 0; found < slots; n++ {
		k := prefix + strconv.Itoa(n)
		if s := keySlot(k); keys[s] == "" {
			keys[s] = k
			found++
		}
	}
	return keys
}

func clusterClient(t *testing.T, addrs []string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// writeEverySlot sets and reads back one key in every slot.
func writeEverySlot(ctx context.Context, c *redis.ClusterClient, keys []string) error {
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Set(ctx, k, k, time.Minute)
		}
		return nil
	}); err != nil {
		return err
	}
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Get(ctx, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, cmd := range cmds {
		if v := cmd.(*redis.StringCmd).Val(); v != keys[i] {
			return fmt.Errorf("GET %s = %q", keys[i], v)
		}
	}
	return nil
}

func TestRedisClusterServesEverySlot(t *testing.T) {
	t.Parallel()
	srv := testserver.RedisCluster(t)
	if len(srv.Addrs()) != 3 || strings.Contains(srv.KeyPrefix(), "{") {
		t.Fatalf("addrs %v, prefix %q", srv.Addrs(), srv.KeyPrefix())
	}
	c := clusterClient(t, srv.Addrs())
	ctx := ctxTimeout(t, 30*time.Second)

	// CLUSTER SLOTS: three masters whose ranges cover 0–16383 exactly once.
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].Start < ranges[j].Start })
	next, masters := 0, map[string]bool{}
	for _, r := range ranges {
		if r.Start != next {
			t.Fatalf("slot ranges %v: gap or overlap at %d", ranges, next)
		}
		next = r.End + 1
		masters[r.Nodes[0].Addr] = true
	}
	if next != slots || len(masters) != 3 {
		t.Fatalf("slot ranges %v cover up to %d on %d masters", ranges, next-1, len(masters))
	}

	keys := keyPerSlot(srv.KeyPrefix())
	for _, k := range keys[:20] { // our CRC agrees with the server's
		if s, err := c.ClusterKeySlot(ctx, k).Result(); err != nil || int(s) != keySlot(k) {
			t.Fatalf("CLUSTER KEYSLOT %s = %d, %v; computed %d", k, s, err, keySlot(k))
		}
	}
	if err := writeEverySlot(ctx, c, keys); err != nil {
		t.Fatal(err)
	}
	for _, a := range srv.Addrs() { // every master holds a share
		n, err := redisClient(t, a).DBSize(ctx).Result()
		if err != nil || n < slots/4 {
			t.Fatalf("DBSIZE on %s = %d, %v", a, n, err)
		}
	}
	notControllable(t, srv.Node(0))
}

func TestPrivateRedisClusterNodeRestart(t *testing.T) {
	t.Parallel()
	srv := testserver.PrivateRedisCluster(t)
	if err := srv.Node(3).Pause(); !errors.Is(err, testserver.ErrNotControllable) {
		t.Fatalf("Node(3).Pause: %v", err)
	}
	c := clusterClient(t, srv.Addrs())
	ctx := ctxTimeout(t, 60*time.Second)
	keys := keyPerSlot(srv.KeyPrefix())
	if err := writeEverySlot(ctx, c, keys); err != nil {
		t.Fatal(err)
	}
	// A restarted master keeps its slots (nodes.conf) and serves them again.
	timed(t, "redis cluster node restart", srv.Node(1).Restart)
	eventually(t, 60*time.Second, "every slot after a master restart", func() error {
		return writeEverySlot(ctx, c, keys)
	})
}
