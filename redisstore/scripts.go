package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

// The Lua scripts, one per operation, sharing lib.lua. Each runs
// atomically on the server that owns the lock's slot and gets the lock's
// record key alone (acquire's the epoch key of its slot too), from which
// it names the lock's other keys. Acquire's text is made per server life
// (see life.go) and runs by EVALSHA only; the others hold nothing of a
// life and run by EVALSHA with an EVAL fallback. Acquire and release
// begin with a fast path for a lock nobody waits for or observes
// (acquirefast.lua, releasefast.lua), which returns before lib.lua's
// helpers are made; their texts start with the Store's constants (consts),
// so a call sends only what changes from call to call.
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

	renewScript   = redis.NewScript(libLua + renewLua)
	getScript     = newScript(libLua + getLua)
	observeScript = newScript(libLua + observeLua)
)

// consts is the Lua text of a Store's constants, which its acquire and
// release scripts begin with: the hand-off window (ms), the publish
// command and the retention (ms). Stores of one configuration make the
// same text, so share their scripts; a Store of another (or of another
// version) has scripts of its own, under other SHAs, beside theirs on the
// same keys and records.
func consts(cfg config, pubCmd string) string {
	return fmt.Sprintf("local WIN, PUB, KEEP = %d, '%s', %d\n", ms(cfg.handoff), pubCmd, ms(cfg.keep))
}

// A script is the text of a script and its SHA, boxed once (a string put
// in an interface allocates on every call).
type script struct {
	text string
	sha  any // string
}

func newScript(text string) script {
	return script{text: text, sha: redis.NewScript(text).Hash()}
}

// ms converts d to whole milliseconds, rounding up, so the server never
// holds a grant for less than the caller asked.
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// call runs the command a on the Store's client (through the coalescer
// where the Store has one); a[keyPos] routes it. A script call is
// "evalsha", the SHA, the number of keys, the keys, then the arguments
// (keyPos 3).
func (s *Store) call(ctx context.Context, a []any, keyPos int8) (any, error) {
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(keyPos)
	var err error
	if s.q != nil {
		err = s.q.do(ctx, cmd)
	} else {
		err = s.c.Process(ctx, cmd)
	}
	if err != nil {
		return nil, err
	}
	return cmd.Result()
}

// run runs sc by the EVALSHA a (see call, a[1] sc's SHA), and by EVAL
// when the server does not know it.
func (s *Store) run(ctx context.Context, sc *script, a []any) (any, error) {
	v, err := s.call(ctx, a, 3)
	if isNoScript(err) {
		cmd := redis.NewCmd(ctx, append([]any{"eval", sc.text}, a[2:]...)...)
		cmd.SetFirstKeyPos(3)
		_ = s.c.Process(ctx, cmd)
		v, err = cmd.Result()
	}
	return v, scriptErr(err)
}

// boxes hands out interface values of keys (contender ids, durations in
// ms), made once per value rather than per call: a Store's callers use
// few. Lookups take no lock; the table is copied on a miss and starts
// anew once it holds maxBoxes values.
type boxes[K comparable] struct {
	m  atomic.Pointer[map[K]any]
	mu sync.Mutex // serializes misses
}

// maxBoxes bounds a boxes table.
const maxBoxes = 256

// get returns k in an interface.
func (b *boxes[K]) get(k K) any {
	if m := b.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	var v any = k
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.m.Load()
	n := 1
	if old != nil {
		if w, ok := (*old)[k]; ok {
			return w
		}
		if len(*old) < maxBoxes {
			n += len(*old)
		}
	}
	m := make(map[K]any, n)
	if n > 1 {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = v
	b.m.Store(&m)
	return v
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

// parseRecord reads {owner, token, ttl ms, transition ms} from v, and
// raises the token floor to its token.
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
	tokenFloor.raise(tok, v[1])
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
