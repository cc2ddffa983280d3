package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/simba-go/simba/lease"
)

// Compile-time check that Store renews in batches.
var _ lease.BatchRenewer = (*Store)(nil)

// maxBatch is how many renewals one statement carries at most; a larger
// batch is sent in chunks, one statement each.
const maxBatch = 500

// errMissingResult is returned when a batch statement returned no row for
// a request (a table changed under the Store).
var errMissingResult = errors.New("sqlstore: a renewal of the batch has no result")

// RenewMany renews each request as [Store.Renew] would, in one statement
// per chunk of up to 500 requests (on MySQL and SQLite an UPDATE and a
// read of the rows), and returns one result per request, in order: what
// lease.Manager uses to renew all the leases it holds in one round trip
// per tick. The error is for the batch as a whole (the outcome of every
// request is then unknown); a grant that is not the current one is a
// result whose Err wraps [lease.ErrNotHeld].
func (s *Store) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	out := make([]lease.RenewResult, len(reqs))
	var args []renewArgs
	var at []int // index in reqs of each element of args
	for i, r := range reqs {
		ttlMs, trMs, err := checkRequest(r.Name, r.Contender, r.TTL, r.Transition)
		if err == nil && (r.Token == 0 || r.Token > math.MaxInt64) {
			err = lease.ErrNotHeld // never granted
		}
		if err != nil {
			out[i].Err = s.errorf("renew", r.Name, err)
			continue
		}
		args = append(args, renewArgs{mutex: r.Name, owner: r.Contender, token: int64(r.Token), ttlMs: ttlMs, transitionMs: trMs})
		at = append(at, i)
	}
	for start := 0; start < len(args); start += maxBatch {
		chunk := args[start:min(start+maxBatch, len(args))]
		var res []renewed
		err := s.retry(ctx, func() (err error) {
			res, err = s.eng.renewMany(ctx, chunk)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("sqlstore: %s renew %d grants: %w", s.dialect, len(chunk), err)
		}
		for j, r := range res {
			i, req := at[start+j], chunk[j]
			key := s.key(req.owner)
			if !r.ok {
				s.hooks.ended(req.mutex, key)
				out[i] = lease.RenewResult{Record: r.record(), Err: s.errorf("renew", req.mutex, lease.ErrNotHeld)}
				continue
			}
			rec := r.record()
			s.hooks.granted(req.mutex, key, rec.Transition, r.waited || r.queue.live(r.now))
			out[i] = lease.RenewResult{Record: rec}
		}
	}
	return out, nil
}

// inOrder returns the result of each request from results by lock.
func inOrder(reqs []renewArgs, results map[string]renewed) ([]renewed, error) {
	out := make([]renewed, len(reqs))
	for i, r := range reqs {
		res, ok := results[r.mutex]
		if !ok {
			return nil, fmt.Errorf("%w: %q", errMissingResult, r.mutex)
		}
		out[i] = res
	}
	return out, nil
}

// renewedRow judges a row read back after a batch UPDATE (MySQL,
// SQLite): the grant was renewed exactly when the row still names its
// owner and token and is live — the UPDATE renews every such grant, and
// none that had lapsed can be live again under the same token.
func renewedRow(req renewArgs, r row) renewed {
	return renewed{ok: r.found && r.owner == req.owner && r.token == req.token && r.transitionAt > r.now, row: r}
}
