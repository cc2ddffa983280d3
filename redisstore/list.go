package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

var _ lease.Lister = (*Store)(nil)

// ListPage implements [lease.Lister]: it scans the key space for grant
// keys (SCAN MATCH <prefix>{*}:g:* COUNT limit, at most 16 SCANs per
// page, so a page may be empty before the end) and reads
// the record of each lock found (one script call each, as Get). On Redis
// Cluster and on a Ring it scans each master (shard) in turn, in the order
// of their addresses. A page holds the names of whole SCAN replies, so it
// may hold somewhat more than limit names, or none before the end; a
// name may come twice when the server rehashes during the listing (SCAN's
// own guarantee). The cursor names a server: after a failover or a
// resharding between pages, the listing goes on at the next server in
// address order.
func (s *Store) ListPage(ctx context.Context, cursor string, limit int) ([]lease.NamedRecord, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: redisstore: list: limit %d is not positive", lease.ErrInvalidArgument, limit)
	}
	limit = min(limit, lease.MaxListPage)
	addr, scan, err := parseListCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	servers, err := s.listServers(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: list: %w", err)
	}
	i, found := slices.BinarySearchFunc(servers, addr, func(sv listServer, a string) int { return strings.Compare(sv.addr, a) })
	if !found { // the server of the cursor is gone: start the next one
		scan = 0
	}
	match := globEscape(s.cfg.prefix) + "{*}:g:*"
	var names []string
	seen := make(map[string]bool)
	// At most maxScans SCANs per page, so that a page of a large key space
	// with few grants comes back in bounded time (perhaps empty).
	for scans := 0; i < len(servers) && len(names) < limit && scans < maxScans; scans++ {
		keys, next, err := servers[i].c.Scan(ctx, scan, match, int64(limit)).Result()
		if err != nil {
			return nil, "", fmt.Errorf("redisstore: list: scan %s: %w", servers[i].addr, err)
		}
		for _, k := range keys {
			if n, ok := s.nameOfKey(k); ok && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		if scan = next; scan == 0 {
			i++
		}
	}
	recs, err := s.getAll(ctx, names)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: list: %w", err)
	}
	page := make([]lease.NamedRecord, 0, len(names))
	for i, n := range names {
		if recs[i].OwnerID != "" {
			page = append(page, lease.NamedRecord{Name: n, Record: recs[i]})
		}
	}
	if i >= len(servers) {
		return page, "", nil
	}
	return page, strconv.FormatUint(scan, 10) + "@" + servers[i].addr, nil
}

// listReaders bounds the Gets of one ListPage in flight.
const listReaders = 8

// getAll reads the records of names, listReaders at a time; the first
// error ends it.
func (s *Store) getAll(ctx context.Context, names []string) ([]lease.Record, error) {
	recs := make([]lease.Record, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, listReaders)
	for i, n := range names {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			recs[i], errs[i] = s.Get(ctx, n)
		}()
	}
	wg.Wait()
	return recs, errors.Join(errs...)
}

// maxScans bounds the SCAN calls of one ListPage.
const maxScans = 16

// listServer is one server a listing scans.
type listServer struct {
	addr string
	c    redis.Cmdable
}

// listServers returns the servers to scan, sorted by address: the masters
// of a cluster, the shards of a ring, else the one server.
func (s *Store) listServers(ctx context.Context) ([]listServer, error) {
	if s.single != nil {
		return []listServer{{addr: s.single.Options().Addr, c: s.single}}, nil
	}
	var mu sync.Mutex
	var out []listServer
	add := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, listServer{addr: c.Options().Addr, c: c})
		return nil
	}
	var err error
	if s.cluster != nil {
		err = s.cluster.ForEachMaster(ctx, add)
	} else {
		err = s.ring.ForEachShard(ctx, add)
	}
	slices.SortFunc(out, func(a, b listServer) int { return strings.Compare(a.addr, b.addr) })
	return out, err
}

// parseListCursor reads "<scan cursor>@<server address>"; "" is the start.
func parseListCursor(cursor string) (string, uint64, error) {
	if cursor == "" {
		return "", 0, nil
	}
	n, addr, ok := strings.Cut(cursor, "@")
	scan, err := strconv.ParseUint(n, 10, 64)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("%w: redisstore: list: bad cursor %q", lease.ErrInvalidArgument, cursor)
	}
	return addr, scan, nil
}

// nameOfKey returns the lock of a grant key of this Store's prefix.
func (s *Store) nameOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.cfg.prefix+"{")
	if !ok {
		return "", false
	}
	tag, after, ok := strings.Cut(rest, "}")
	if !ok || !strings.HasPrefix(after, ":g:") {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(tag)
	if err != nil || lease.ValidateName(string(b)) != nil {
		return "", false
	}
	return string(b), true
}

// globEscape quotes the glob characters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
