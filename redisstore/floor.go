package redisstore

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// The token floor. A record the acquire script makes, or adopts from an
// earlier life of the server, starts its counter from the server's clock
// in µs: after the record was lost (a flush, a restart without it, a
// failover), a clock that stepped back by more than the record's age would
// restart the lock's tokens below those already issued. So every acquire
// sends the highest token the process has seen in a reply to any of its
// Stores (grants, refusals, Get, renewals, observers' events), and a new
// grant's token is one above the larger of the lock's counter and that
// floor, whoever made the record. One floor per process, not per Store or
// per lock: O(1) memory, and it covers every Store and Manager of the
// process. It often decides: every counter starts from the server's clock
// in µs when its record is made and then grows by one per grant, far
// slower than the clock, so a lock whose record is older than another the
// process used gets its next token just above that one's. Tokens need
// only increase per lock, and they still do; what a token is worth says
// nothing across locks. Tokens from 2^53 on, which Lua's numbers cannot
// count exactly, are not noted.
var tokenFloor floor

// floor is the highest token noted, kept as the server sent it (a decimal
// string in an interface), so that sending it allocates nothing.
type floor struct {
	mu  sync.Mutex    // serializes raises
	max atomic.Uint64 // the value of arg
	arg atomic.Value  // string: the floor as sent, in an interface
}

// maxExact is 2^53, where Lua's numbers stop counting exactly.
const maxExact = 1 << 53

// zeroFloor is the floor before any token was seen.
var zeroFloor any = "0"

// raise notes tok, which v, a script reply, carries (as a decimal string,
// or an integer).
func (f *floor) raise(tok uint64, v any) {
	if tok <= f.max.Load() || tok >= maxExact {
		return
	}
	if _, ok := v.(string); !ok {
		v = strconv.FormatUint(tok, 10)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if tok > f.max.Load() {
		f.arg.Store(v) // before max: whoever reads max ≥ tok finds arg ≥ tok
		f.max.Store(tok)
	}
}

// get returns the floor as an acquire script's argument.
func (f *floor) get() any {
	if v := f.arg.Load(); v != nil {
		return v
	}
	return zeroFloor
}
