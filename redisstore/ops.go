package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

// Acquire grants lock to contender when it is free (and not held back for
// another waiter or after a possible loss of data), when the previous
// grant's transition has ended, or when contender holds the live grant
// (then it extends that grant and keeps its token). A new grant gets a
// token above every earlier one of the lock. A losing contender joins the
// lock's wait queue. One script, one round trip (two commands in one
// pipeline with [WithWaitReplicas]).
func (s *Store) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if err := lease.ValidateRequest(name, contender, ttl, transition); err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w", name, err)
	}
	rk := s.recordKey(name)
	ttlMS, trMS := ms(ttl), ms(transition)
	a := []any{"evalsha", nil, 2, rk, s.epochOf(rk), // the SHA: runAcquire's
		s.contenders.get(contender), s.durations.get(ttlMS + trMS), s.durations.get(trMS),
		s.durations.get(max(ms(s.cfg.keep), ttlMS+trMS)), // the expiries, made here: see acquirefast.lua
		tokenFloor.get()} // the highest token seen: see floor.go
	sent := time.Now()
	v, acks, err := s.runAcquire(ctx, rk, a)
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w", name, err)
	}
	rec, err := decodeAcquire(v, contender, ttlMS, trMS)
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w", name, err)
	}
	if rec.Held(contender) {
		_, plain := v.(string) // the fast path's reply: its token
		s.grants.put(grantID(name, contender, rec.Token), trMS, sent, s.cfg.keep, plain)
		if s.cfg.waitN > 0 && acks < int64(s.cfg.waitN) {
			return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w: %d of %d replicas in %v",
				name, ErrNotReplicated, acks, s.cfg.waitN, s.cfg.waitTimeout)
		}
	}
	return rec, nil
}

// runAcquire runs the acquire script of the current life of the server
// that owns the lock, loading it when the server does not know it (a new
// Store, or a new life of the server), and, with [WithWaitReplicas], WAIT
// in the same pipeline on that server's connection, so WAIT counts the
// replicas that acknowledged this very write. a is the EVALSHA (see call)
// of the record key rk; runAcquire sets its SHA. It returns the script's
// reply and the acknowledgements.
func (s *Store) runAcquire(ctx context.Context, rk string, a []any) (any, int64, error) {
	stale := ""
	for range 3 {
		c, addr, err := s.serverOf(ctx, rk)
		if err != nil {
			return nil, 0, err
		}
		l, err := s.acquireSHA(ctx, c, addr, stale)
		if err != nil {
			return nil, 0, scriptErr(err)
		}
		a[1] = l.box
		var v any
		var acks int64
		if s.cfg.waitN > 0 {
			v, acks, err = s.evalAndWait(ctx, c, a)
		} else {
			v, err = s.call(ctx, a, 3)
		}
		if !isNoScript(err) {
			return v, acks, scriptErr(err)
		}
		stale = l.sha // nothing ran: a new life of the server, or the slot moved
	}
	return nil, 0, errNoScript
}

// epochOf returns the epoch key of the slot of the record key rk, boxed
// (outside Redis Cluster the Store's one, boxed once).
func (s *Store) epochOf(rk string) any {
	if s.cluster == nil {
		return s.epochArg
	}
	return s.epochKey(rk)
}

// evalAndWait runs the EVALSHA a (see call) and WAIT in one pipeline on c.
func (s *Store) evalAndWait(ctx context.Context, c *redis.Client, a []any) (any, int64, error) {
	var ev, wait *redis.Cmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		ev = p.Do(ctx, a...)
		wait = p.Do(ctx, "WAIT", s.cfg.waitN, ms(s.cfg.waitTimeout))
		return nil
	})
	if err := ev.Err(); err != nil {
		return nil, 0, err
	}
	acks, err := wait.Int64()
	if err != nil {
		return nil, 0, err
	}
	return ev.Val(), acks, nil
}

// Renew extends the grant of contender with token by ttl, then transition,
// from the server's now. It fails with an error wrapping [lease.ErrNotHeld],
// and returns the current record, when that grant is not the current one or
// its transition has ended; it never re-acquires.
func (s *Store) Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	res, err := s.RenewMany(ctx, []lease.RenewRequest{{
		Name: name, Contender: contender, Token: token, TTL: ttl, Transition: transition,
	}})
	if err != nil {
		return lease.Record{}, err
	}
	return res[0].Record, res[0].Err
}

// Release ends contender's interest in lock: it leaves the wait queue and,
// when it holds the grant with token, the grant ends at once, the lock is
// held back for the longest live waiter (see [WithHandoff]) and that waiter
// is woken. Otherwise Release returns an error wrapping [lease.ErrNotHeld]
// and leaves the owner alone; token 0 only withdraws from the queue.
func (s *Store) Release(ctx context.Context, name, contender string, token uint64) error {
	if err := checkNameContender(name, contender); err != nil {
		return fmt.Errorf("redisstore: release %q: %w", name, err)
	}
	if token != 0 && s.grants.drop(grantID(name, contender, token)) {
		// A grant of the fast path: nobody waited for or observed the
		// lock then, and while nobody does its key stays a string, which
		// one GETDEL ends. A waiter or an observer made it a hash
		// (WRONGTYPE, nothing done), and a grant already gone (nil) may
		// leave the caller queued: the script then decides.
		_, err := s.call(ctx, []any{"getdel", s.grantKey(name, token, contender)}, 1)
		if err == nil {
			return nil
		}
		if !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return fmt.Errorf("redisstore: release %q: %w", name, scriptErr(err))
		}
	}
	v, err := s.run(ctx, &s.release, []any{"evalsha", s.release.sha, 1, s.recordKey(name),
		s.contenders.get(contender), token})
	if err != nil {
		return fmt.Errorf("redisstore: release %q: %w", name, err)
	}
	switch v {
	case int64(1):
		return nil
	case int64(0):
		return fmt.Errorf("redisstore: release %q: %w", name, lease.ErrNotHeld)
	}
	return fmt.Errorf("redisstore: release %q: %w: %T %v", name, ErrUnexpectedReply, v, v)
}

// Get returns the current record of lock without changing it. A free or
// unknown lock has an empty OwnerID; a free lock held back for a waiter (or
// after a restart) has a positive Transition (the rest of the hold).
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	if err := lease.ValidateName(name); err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: get: %w", err)
	}
	v, err := s.run(ctx, &getScript, []any{"evalsha", getScript.sha, 1, s.recordKey(name)})
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: get %q: %w", name, err)
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: get %q: %w", name, err)
	}
	return rec, nil
}

// decodeRecord reads the record a script returned.
func decodeRecord(v any) (lease.Record, error) {
	l, err := parseList(v)
	if err != nil {
		return lease.Record{}, err
	}
	return parseRecord(l)
}

// decodeAcquire reads the acquire script's reply: the record, or only the
// token of a grant to contender for ttl then transition ms (acquirefast.lua),
// which leaves the rest to the caller. It raises the token floor to the
// reply's token.
func decodeAcquire(v any, contender string, ttl, transition int64) (lease.Record, error) {
	t, ok := v.(string)
	if !ok {
		return decodeRecord(v)
	}
	tok, err := strconv.ParseUint(t, 10, 64) // not uintOf: boxing t costs an allocation
	if err != nil {
		return lease.Record{}, fmt.Errorf("%w: %q where a token belongs", ErrUnexpectedReply, t)
	}
	if tok == 0 {
		return lease.Record{}, fmt.Errorf("%w: token 0 granted", ErrUnexpectedReply)
	}
	tokenFloor.raise(tok, v)
	return lease.Record{
		OwnerID:    contender,
		Token:      tok,
		TTL:        time.Duration(ttl) * time.Millisecond,
		Transition: time.Duration(ttl+transition) * time.Millisecond,
	}, nil
}

// checkNameContender validates a lock name and a contender id.
func checkNameContender(name, contender string) error {
	if err := lease.ValidateName(name); err != nil {
		return err
	}
	return lease.ValidateContenderID(contender)
}
