package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

// RenewMany renews each request as [Store.Renew] would and returns one
// result per request, in order. Requests are grouped by cluster slot and
// each group is one call of the renew script; all groups go out in one
// pipeline (go-redis sends a cluster pipeline to every node at once), so a
// Manager's renewal tick costs one round trip per node however many leases
// it holds. An invalid request gets its own error. The batch error means
// the outcome of every valid request is unknown.
func (s *Store) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	results := make([]lease.RenewResult, len(reqs))
	groups := map[int][]int{} // group key -> request indexes
	var order []int
	for i, r := range reqs {
		if err := lease.ValidateRequest(r.Mutex, r.Contender, r.TTL, r.Transition); err != nil {
			results[i].Err = fmt.Errorf("redisstore: renew %q: %w", r.Mutex, err)
			continue
		}
		g := s.renewGroup(r.Mutex, i)
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	if len(order) == 0 {
		return results, nil
	}
	calls := make([]renewCall, len(order))
	for n, g := range order {
		calls[n] = s.renewCall(reqs, groups[g])
	}
	if err := s.runRenewCalls(ctx, calls); err != nil {
		return nil, fmt.Errorf("redisstore: renew %d leases: %w", len(reqs), err)
	}
	for _, c := range calls {
		if err := c.decode(reqs, results); err != nil {
			return nil, fmt.Errorf("redisstore: renew %d leases: %w", len(reqs), err)
		}
	}
	return results, nil
}

// renewGroup returns the group of request i: its slot on Redis Cluster,
// one group for a single server, and a group per request on other clients
// (a Ring routes a script by its first key only).
func (s *Store) renewGroup(mutex string, i int) int {
	switch {
	case s.cluster != nil:
		return int(slotOf(s.tagged(mutex)))
	case s.single != nil:
		return 0
	}
	return i
}

// renewCall is one call of the renew script for the requests idx.
type renewCall struct {
	idx  []int
	keys []string
	args []any
	cmd  *redis.Cmd
}

func (s *Store) renewCall(reqs []lease.RenewRequest, idx []int) renewCall {
	c := renewCall{idx: idx, keys: make([]string, 0, len(idx)), args: make([]any, 0, 4*len(idx))}
	for _, i := range idx {
		r := reqs[i]
		c.keys = append(c.keys, s.keysOf(r.Mutex)[0])
		c.args = append(c.args, r.Contender, strconv.FormatUint(r.Token, 10), ms(r.TTL), ms(r.Transition))
	}
	return c
}

// runRenewCalls sends every call in one pipeline of EVALSHA. When a server
// does not know the script (NOSCRIPT: nothing ran), the script is loaded
// (on every master of a cluster) and those calls go out once more.
func (s *Store) runRenewCalls(ctx context.Context, calls []renewCall) error {
	todo := make([]*renewCall, len(calls))
	for i := range calls {
		todo[i] = &calls[i]
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		if len(todo) == 1 {
			c := todo[0]
			c.cmd = renewScript.Run(ctx, s.c, c.keys, c.args...)
			return scriptErr(c.cmd.Err())
		}
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range todo {
				c.cmd = renewScript.EvalSha(ctx, p, c.keys, c.args...)
			}
			return nil
		})
		var unknown []*renewCall
		for _, c := range todo {
			err := c.cmd.Err()
			if redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
				unknown = append(unknown, c)
			} else if err != nil {
				return scriptErr(err)
			}
		}
		if len(unknown) > 0 {
			if err := renewScript.Load(ctx, s.c).Err(); err != nil {
				return err
			}
		}
		todo = unknown
	}
	return nil
}

// decode fills the results of the call's requests from its reply: five
// values per request (renewed or not, then the record).
func (c renewCall) decode(reqs []lease.RenewRequest, results []lease.RenewResult) error {
	l, err := parseList(c.cmd.Val())
	if err != nil {
		return err
	}
	if len(l) != 5*len(c.idx) {
		return fmt.Errorf("%w: %d values for %d renewals", ErrUnexpectedReply, len(l), len(c.idx))
	}
	for n, i := range c.idx {
		ok, err := uintOf(l[5*n])
		if err != nil || ok > 1 {
			return errors.Join(ErrUnexpectedReply, err)
		}
		rec, err := parseRecord(l[5*n+1 : 5*n+5])
		if err != nil {
			return err
		}
		results[i].Record = rec
		if ok == 0 {
			results[i].Err = fmt.Errorf("redisstore: renew %q: %w", reqs[i].Mutex, lease.ErrNotHeld)
		}
	}
	return nil
}
