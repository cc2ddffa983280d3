package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

// maxPerScript bounds the renewals one renew script makes, so that no
// script holds Redis for more than a fraction of a millisecond.
const maxPerScript = 32

// RenewMany renews each request as [Store.Renew] would and returns one
// result per request, in order, in one round trip per node (go-redis sends
// a cluster pipeline to every node at once) in the common case. A renewal
// of a grant this Store made is one PEXPIRE of the grant's key, which is
// named by its token and owner: 1 renewed it, 0 means it is not held (the
// renew script then reports the current owner). Other renewals, and one
// every retention/2 per grant, run the renew script, which also extends
// the grant's record; those are grouped by slot, at most 32 per call. An
// invalid request gets its own error. The batch error means the outcome of
// every valid request is unknown.
func (s *Store) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	results := make([]lease.RenewResult, len(reqs))
	var fast, slow []int
	for i, r := range reqs {
		if err := lease.ValidateRequest(r.Name, r.Contender, r.TTL, r.Transition); err != nil {
			results[i].Err = fmt.Errorf("redisstore: renew %q: %w", r.Name, err)
			continue
		}
		if s.grants.fast(grantID(r.Name, r.Contender, r.Token), ms(r.TTL), ms(r.Transition), s.cfg.keep) {
			fast = append(fast, i)
		} else {
			slow = append(slow, i)
		}
	}
	b := renewBatch{s: s, reqs: reqs, results: results}
	for round := 0; len(fast)+len(slow) > 0; round++ {
		if round == 3 {
			return nil, fmt.Errorf("redisstore: renew %d leases: %w", len(reqs), errNoScript)
		}
		var err error
		if slow, err = b.round(ctx, fast, slow); err != nil {
			return nil, fmt.Errorf("redisstore: renew %d leases: %w", len(reqs), err)
		}
		fast = nil
	}
	return results, nil
}

// renewBatch is one RenewMany call.
type renewBatch struct {
	s       *Store
	reqs    []lease.RenewRequest
	results []lease.RenewResult
}

// item is one command of a round: how to queue it and which key routes it.
type item struct {
	key   string
	queue func(p redis.Pipeliner)
}

// round sends the PEXPIREs of fast and the renew scripts of slow in one
// pipeline (per server, with WAIT, under [WithWaitReplicas]) and fills in
// the results it settles. It returns the requests the next round sends to
// the renew script: those a PEXPIRE found not held (the script reports the
// owner) and those of script calls the server did not know (loaded since).
func (b *renewBatch) round(ctx context.Context, fast, slow []int) (nextSlow []int, err error) {
	s := b.s
	sent := time.Now()
	pex := make([]*redis.BoolCmd, len(fast))
	calls := b.calls(slow)
	items := make([]item, 0, len(fast)+len(calls))
	for n, i := range fast {
		r := b.reqs[i]
		key := s.grantKey(r.Name, r.Token, r.Contender)
		span := ms(r.TTL) + ms(r.Transition)
		items = append(items, item{key: key, queue: func(p redis.Pipeliner) { pex[n] = p.PExpire(ctx, key, time.Duration(span)*time.Millisecond) }})
	}
	for n := range calls {
		c := &calls[n]
		items = append(items, item{key: c.keys[0], queue: func(p redis.Pipeliner) { c.cmd = renewScript.EvalSha(ctx, p, c.keys, c.args...) }})
	}
	unacked, clocks, err := s.pipeline(ctx, items)
	if err != nil {
		return nil, err
	}
	for n, i := range fast {
		ok, err := pex[n].Result()
		switch {
		case err != nil:
			return nil, err
		case ok && unacked[n]:
			b.results[i].Err = b.notReplicated(b.reqs[i].Name)
		case ok:
			r := b.reqs[i]
			b.results[i].Record = lease.Record{OwnerID: r.Contender, Token: r.Token,
				TTL: msDur(ms(r.TTL)), Transition: msDur(ms(r.TTL) + ms(r.Transition)), ServerTime: clocks[n]}
		default:
			nextSlow = append(nextSlow, i) // not held, or a grant kept elsewhere: ask the script
		}
	}
	unknown := false
	for n, c := range calls {
		if err := c.cmd.Err(); isNoScript(err) {
			nextSlow = append(nextSlow, c.idx...)
			unknown = true
			continue
		} else if err != nil {
			return nil, scriptErr(err)
		}
		if err := b.decode(c, sent, unacked[len(fast)+n], clocks[len(fast)+n]); err != nil {
			return nil, err
		}
	}
	if unknown {
		if err := renewScript.Load(ctx, s.c).Err(); err != nil {
			return nil, err
		}
	}
	return nextSlow, nil
}

// pipeline sends items in one pipeline (go-redis splits it by node). With
// [WithWaitReplicas] it sends one pipeline per server, concurrently, each
// ending in WAIT, and reports which items too few replicas acknowledged.
// The commands' own errors are left in them. Each pipeline to one server
// also reads the server's clock (TIME: one command more, no round trip
// more), reported per item in clocks; on Redis Cluster or a Ring without
// WAIT, where go-redis splits one pipeline by node, clocks stay zero.
func (s *Store) pipeline(ctx context.Context, items []item) (unacked []bool, clocks []time.Time, err error) {
	unacked = make([]bool, len(items))
	clocks = make([]time.Time, len(items))
	if s.cfg.waitN == 0 {
		var tm *redis.TimeCmd
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, it := range items {
				it.queue(p)
			}
			if s.cluster == nil && s.ring == nil {
				tm = p.Time(ctx)
			}
			return nil
		})
		if tm != nil && tm.Err() == nil {
			for i := range clocks {
				clocks[i] = tm.Val()
			}
		}
		return unacked, clocks, nil
	}
	groups := map[*redis.Client][]int{}
	for i, it := range items {
		c, _, err := s.serverOf(ctx, it.key)
		if err != nil {
			return nil, nil, err
		}
		groups[c] = append(groups[c], i)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for c, idx := range groups {
		wg.Go(func() {
			var wait *redis.Cmd
			var tm *redis.TimeCmd
			_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, i := range idx {
					items[i].queue(p)
				}
				tm = p.Time(ctx)
				wait = p.Do(ctx, "WAIT", s.cfg.waitN, ms(s.cfg.waitTimeout))
				return nil
			})
			acks, err := wait.Int64()
			if tm.Err() == nil {
				for _, i := range idx {
					clocks[i] = tm.Val() // each item once: no lock needed
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if acks < int64(s.cfg.waitN) {
				for _, i := range idx {
					unacked[i] = true
				}
			}
		})
	}
	wg.Wait()
	return unacked, clocks, errors.Join(errs...)
}

// notReplicated is the error of a renewal the replicas did not acknowledge.
func (b *renewBatch) notReplicated(name string) error {
	s := b.s
	return fmt.Errorf("redisstore: renew %q: %w: fewer than %d replicas in %v", name, ErrNotReplicated, s.cfg.waitN, s.cfg.waitTimeout)
}

// renewCall is one call of the renew script for the requests idx.
type renewCall struct {
	idx  []int
	keys []string
	args []any
	cmd  *redis.Cmd
}

// calls groups the requests idx into renew script calls: by cluster slot,
// one group on a single server, one call per request on a Ring (which
// routes a script by its first key only); at most maxPerScript per call.
func (b *renewBatch) calls(idx []int) []renewCall {
	s := b.s
	var calls []renewCall
	open := map[int]int{} // group -> index of its open call
	for _, i := range idx {
		r := b.reqs[i]
		g := 0
		switch {
		case s.cluster != nil:
			g = int(slotOf(s.tagged(r.Name)))
		case s.ring != nil:
			g = -1 - i
		}
		n, ok := open[g]
		if !ok || len(calls[n].idx) == maxPerScript {
			n = len(calls)
			open[g] = n
			calls = append(calls, renewCall{args: []any{ms(s.cfg.keep)}})
		}
		c := &calls[n]
		c.idx = append(c.idx, i)
		c.keys = append(c.keys, s.recordKey(r.Name))
		c.args = append(c.args, r.Contender, strconv.FormatUint(r.Token, 10), ms(r.TTL), ms(r.Transition))
	}
	return calls
}

// decode fills the results of the call's requests from its reply: five
// values per request (renewed or not, then the record).
func (b *renewBatch) decode(c renewCall, sent time.Time, unacked bool, clock time.Time) error {
	s := b.s
	l, err := parseList(c.cmd.Val())
	if err != nil {
		return err
	}
	if len(l) != 5*len(c.idx) {
		return fmt.Errorf("%w: %d values for %d renewals", ErrUnexpectedReply, len(l), len(c.idx))
	}
	for n, i := range c.idx {
		r := b.reqs[i]
		ok, err := uintOf(l[5*n])
		if err != nil || ok > 1 {
			return errors.Join(ErrUnexpectedReply, err)
		}
		rec, err := parseRecord(l[5*n+1 : 5*n+5])
		if err != nil {
			return err
		}
		rec.ServerTime = clock
		id := grantID(r.Name, r.Contender, r.Token)
		switch {
		case ok == 0:
			s.grants.drop(id)
			b.results[i] = lease.RenewResult{Record: rec, Err: fmt.Errorf("redisstore: renew %q: %w", r.Name, lease.ErrNotHeld)}
		case unacked:
			b.results[i].Err = b.notReplicated(r.Name)
		default:
			s.grants.put(id, ms(r.Transition), sent, s.cfg.keep, false)
			b.results[i].Record = rec
		}
	}
	return nil
}

// msDur converts whole milliseconds to a Duration.
func msDur(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
