package zkstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

var _ lease.Lister = (*Store)(nil)

// ListPage implements [lease.Lister]: the locks under the root with an
// owner, by name, at most limit per page, each read as Get reads it (one
// request per name). The cursor is the last name of the previous page.
// ZooKeeper cannot page the children of a node: every page reads the
// root's child names (bounded by the server's jute.maxbuffer, 1 MB by
// default: some ten thousand names), but reads the queues of one page's
// names only.
func (s *Store) ListPage(ctx context.Context, cursor string, limit int) ([]lease.NamedRecord, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: zkstore: list: limit %d is not positive", lease.ErrInvalidArgument, limit)
	}
	limit = min(limit, lease.MaxListPage)
	var kids []string
	err := s.do(ctx, func() (err error) {
		kids, _, err = s.sess.conn.Children(s.root)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("zkstore: list %s: %w", s.root, err)
	}
	names := make([]string, 0, len(kids))
	for _, k := range kids {
		if n, ok := unescape(k); ok && escape(n) == k && n > cursor && lease.ValidateName(n) == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	next := ""
	if len(names) > limit {
		names, next = names[:limit], names[limit-1]
	}
	page := make([]lease.NamedRecord, 0, len(names))
	for _, n := range names {
		rec, err := s.Get(ctx, n)
		if err != nil {
			return nil, "", fmt.Errorf("zkstore: list: %w", err)
		}
		if rec.OwnerID != "" {
			page = append(page, lease.NamedRecord{Name: n, Record: rec})
		}
	}
	return page, next, nil
}
