package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

// Acquire grants mutex to contender when it is free (and not held back for
// another waiter), when the previous grant's transition has ended, or when
// contender holds the live grant (then it extends that grant and keeps its
// token). A new grant gets a token above every earlier one of the mutex. A
// losing contender joins the mutex's wait queue. One script, one round trip
// (two commands in one pipeline with [WithWaitReplicas]).
func (s *Store) Acquire(ctx context.Context, mutex, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if err := lease.ValidateRequest(mutex, contender, ttl, transition); err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w", mutex, err)
	}
	k := s.keysOf(mutex)
	guard := "1"
	if s.cfg.noGuard {
		guard = "0"
	}
	args := []any{contender, ms(ttl), ms(transition), ms(s.cfg.handoff), s.pubCmd, ms(tokenRetention), guard}
	var v any
	var err error
	if s.cfg.waitN > 0 {
		var acks int64
		v, acks, err = s.runAndWait(ctx, k[:], args)
		if err == nil {
			rec, perr := decodeRecord(v)
			if perr == nil && rec.Held(contender) && acks < int64(s.cfg.waitN) {
				return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w: %d of %d replicas in %v",
					mutex, ErrNotReplicated, acks, s.cfg.waitN, s.cfg.waitTimeout)
			}
		}
	} else {
		v, err = s.run(ctx, acquireScript, k[:], args...)
	}
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w", mutex, err)
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: acquire %q: %w", mutex, err)
	}
	return rec, nil
}

// runAndWait runs the acquire script and WAIT in one pipeline on the
// connection of the server that owns the mutex, so WAIT counts the
// replicas that acknowledged this very write. It returns the script's
// reply and the number of acknowledgements.
func (s *Store) runAndWait(ctx context.Context, k []string, args []any) (any, int64, error) {
	node := s.single
	if s.cluster != nil {
		var err error
		if node, err = s.cluster.MasterForKey(ctx, k[0]); err != nil {
			return nil, 0, err
		}
	}
	for attempt := 0; ; attempt++ {
		var ev *redis.Cmd
		var wait *redis.Cmd
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			ev = acquireScript.EvalSha(ctx, p, k, args...)
			wait = p.Do(ctx, "WAIT", s.cfg.waitN, ms(s.cfg.waitTimeout))
			return nil
		})
		if redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") && attempt == 0 {
			if err := acquireScript.Load(ctx, node).Err(); err != nil {
				return nil, 0, err
			}
			continue // nothing ran: the script was unknown
		}
		if err := ev.Err(); err != nil {
			return nil, 0, scriptErr(err)
		}
		acks, err := wait.Int64()
		if err != nil {
			return nil, 0, err
		}
		return ev.Val(), acks, nil
	}
}

// Renew extends the grant of contender with token by ttl, then transition,
// from the server's now. It fails with an error wrapping [lease.ErrNotHeld],
// and returns the current record, when that grant is not the current one or
// its transition has ended; it never re-acquires.
func (s *Store) Renew(ctx context.Context, mutex, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	res, err := s.RenewMany(ctx, []lease.RenewRequest{{
		Mutex: mutex, Contender: contender, Token: token, TTL: ttl, Transition: transition,
	}})
	if err != nil {
		return lease.Record{}, err
	}
	return res[0].Record, res[0].Err
}

// Release ends contender's interest in mutex: it leaves the wait queue and,
// when it holds the grant with token, the grant ends at once, the mutex is
// held back for the longest live waiter (see [WithHandoff]) and that waiter
// is woken. Otherwise Release returns an error wrapping [lease.ErrNotHeld]
// and leaves the owner alone; token 0 only withdraws from the queue.
func (s *Store) Release(ctx context.Context, mutex, contender string, token uint64) error {
	if err := checkNameContender(mutex, contender); err != nil {
		return fmt.Errorf("redisstore: release %q: %w", mutex, err)
	}
	k := s.keysOf(mutex)
	v, err := s.run(ctx, releaseScript, k[:], contender, strconv.FormatUint(token, 10), ms(s.cfg.handoff), s.pubCmd)
	if err != nil {
		return fmt.Errorf("redisstore: release %q: %w", mutex, err)
	}
	switch v {
	case int64(1):
		return nil
	case int64(0):
		return fmt.Errorf("redisstore: release %q: %w", mutex, lease.ErrNotHeld)
	}
	return fmt.Errorf("redisstore: release %q: %w: %T %v", mutex, ErrUnexpectedReply, v, v)
}

// Get returns the current record of mutex without changing it. A free or
// unknown mutex has an empty Owner; a free mutex held back for a waiter has
// a positive Transition (the rest of the hand-off window).
func (s *Store) Get(ctx context.Context, mutex string) (lease.Record, error) {
	if err := lease.ValidateName(mutex); err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: get: %w", err)
	}
	k := s.keysOf(mutex)
	v, err := s.run(ctx, getScript, k[:])
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: get %q: %w", mutex, err)
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return lease.Record{}, fmt.Errorf("redisstore: get %q: %w", mutex, err)
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

// checkNameContender validates a mutex name and a contender id.
func checkNameContender(mutex, contender string) error {
	if err := lease.ValidateName(mutex); err != nil {
		return err
	}
	return lease.ValidateContenderID(contender)
}
