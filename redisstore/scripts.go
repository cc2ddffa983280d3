package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

// The Lua scripts, one per operation, sharing lib.lua. Each runs
// atomically on the server that owns the lock's slot. Acquire's text is
// made per server life (see life.go) and runs by EVALSHA only; the others
// hold nothing of a life and run by EVALSHA with an EVAL fallback. Acquire
// and release begin with a fast path for a lock nobody waits for or
// observes (acquirefast.lua, releasefast.lua), which returns before
// lib.lua's helpers are made.
var (
	//go:embed lib.lua
	libLua string
	//go:embed acquirefast.lua
	acquireFastLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed releasefast.lua
	releaseFastLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed get.lua
	getLua string
	//go:embed observe.lua
	observeLua string

	releaseScript = redis.NewScript(releaseFastLua + libLua + releaseLua)
	renewScript   = redis.NewScript(libLua + renewLua)
	getScript     = redis.NewScript(libLua + getLua)
	observeScript = redis.NewScript(libLua + observeLua)
)

// ms converts d to whole milliseconds, rounding up, so the server never
// holds a grant for less than the caller asked.
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// run runs script on the Store's client: EVALSHA (through the coalescer
// where the Store has one), and EVAL when the server does not know it.
func (s *Store) run(ctx context.Context, script *redis.Script, k []string, args ...any) (any, error) {
	if s.q == nil {
		v, err := script.Run(ctx, s.c, k, args...).Result()
		return v, scriptErr(err)
	}
	v, err := s.evalSha(ctx, script.Hash(), k, args...)
	if isNoScript(err) {
		v, err = script.Eval(ctx, s.c, k, args...).Result()
	}
	return v, scriptErr(err)
}

// scriptErr marks the error a script raises on a foreign value under the
// Store's keys, and a server's refusal to run the Store's commands for
// this client (an ACL without the scripting commands, INFO or the keys:
// NOPERM) as lease.ErrStoreSetup.
func scriptErr(err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "SIMBA ") {
		return fmt.Errorf("%w: %v", ErrUnexpectedReply, err)
	}
	if strings.HasPrefix(err.Error(), "NOPERM") {
		return fmt.Errorf("%w (the client's ACL user needs the scripting commands, INFO and the store's keys): %w", lease.ErrStoreSetup, err)
	}
	return err
}

// parseRecord reads {owner, token, ttl ms, transition ms} from v.
func parseRecord(v []any) (lease.Record, error) {
	if len(v) != 4 {
		return lease.Record{}, fmt.Errorf("%w: %d values for a record", ErrUnexpectedReply, len(v))
	}
	owner, ok := v[0].(string)
	if !ok {
		return lease.Record{}, fmt.Errorf("%w: owner %T", ErrUnexpectedReply, v[0])
	}
	tok, err := uintOf(v[1])
	if err != nil {
		return lease.Record{}, err
	}
	ttl, err := uintOf(v[2])
	if err != nil {
		return lease.Record{}, err
	}
	tr, err := uintOf(v[3])
	if err != nil {
		return lease.Record{}, err
	}
	if (owner == "") != (tok == 0) || ttl > tr || tr > math.MaxInt64/uint64(time.Millisecond) {
		return lease.Record{}, fmt.Errorf("%w: record %q %d %d %d", ErrUnexpectedReply, owner, tok, ttl, tr)
	}
	return lease.Record{
		OwnerID:    owner,
		Token:      tok,
		TTL:        time.Duration(ttl) * time.Millisecond,
		Transition: time.Duration(tr) * time.Millisecond,
	}, nil
}

// uintOf reads a non-negative integer from a script reply: an integer, or
// a decimal string (tokens, which Lua's doubles must not round).
func uintOf(v any) (uint64, error) {
	switch v := v.(type) {
	case int64:
		if v >= 0 {
			return uint64(v), nil
		}
	case string:
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: %T %v where a number belongs", ErrUnexpectedReply, v, v)
}

// parseList reads a script reply that must be an array.
func parseList(v any) ([]any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T where an array belongs", ErrUnexpectedReply, v)
	}
	return l, nil
}
