package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/backoff"
)

// grantHooks tell a dialect's push path what the Store's own calls
// learned about the grants and queue entries of its contenders (by queue
// key). None of them blocks.
type grantHooks interface {
	// canWait reports whether key may join lock's queue: the push path
	// can wake it.
	canWait(mutex, key string) bool
	// waiting: an acquire lost and left key queued behind pred (a queue
	// key; "" when the lock has no owner).
	waiting(mutex, key, pred string)
	// granted: key holds lock for at most remaining more; waited is
	// true when others are known to wait for it.
	granted(mutex, key string, remaining time.Duration, waited bool)
	// ended: key's grant of lock ended, or key left its queue.
	ended(mutex, key string)
}

// lender is what a push path with doorbells adds to grantHooks: the
// connection that holds a holder's doorbell, lent to its Release.
type lender interface {
	lend(mutex, key string) dbtx
	giveBack(mutex, key string, letGo bool)
}

// noHooks is the grantHooks of a dialect that needs none.
type noHooks struct{}

func (noHooks) canWait(string, string) bool                 { return true }
func (noHooks) waiting(string, string, string)              {}
func (noHooks) granted(string, string, time.Duration, bool) {}
func (noHooks) ended(string, string)                        {}
func (b *bells) canWait(name, key string) bool              { return b.admit(bellID{name, key}) }
func (b *bells) waiting(name, key, pred string) {
	b.instruct(bellID{name, key}, instr{op: opWait, pred: pred})
}
func (b *bells) granted(name, key string, rem time.Duration, waited bool) {
	b.grant(bellID{name, key}, rem, waited)
}
func (b *bells) ended(name, key string) { b.end(bellID{name, key}) }

// bellID names the bell of one contender (by key) for one lock.
type bellID struct{ mutex, key string }

// What a ringer does (instr.op).
const (
	opWait = iota // hold our bell, wait behind pred's
	opHold        // hold our bell: we hold the lock
	opPark        // let every bell go, keep the connection for the next wait
	opStop        // let every bell go and end
)

type instr struct {
	op    int
	pred  string    // opWait: whose bell to wait on
	until time.Time // opHold: when the grant lapses unless renewed
}

// bellWait is the longest GET_LOCK a ringer sends (MariaDB refuses -1);
// it waits again after it.
const bellWait = time.Hour

// rangWait is how long a ringer that rang waits for its contender's next
// acquire to say what comes next before it gives its bell up, and how
// long a parked ringer keeps its connection for the contender's next wait.
const rangWait = 10 * time.Second

// bells is the MySQL push path, and PostgreSQL's with
// WithPostgresDoorbells (queries/*/bells.sql, through bellSQL). A
// contender of this Store that waits in a lock's queue has a ringer: a
// goroutine with a connection of its own that holds the contender's bell
// (a named lock, an advisory lock) and blocks on the bell of whom it waits
// behind. When that bell lets go, the ringer wakes the contender's Watch;
// if the contender then holds the lock, the ringer keeps its bell until
// the grant ends, so that the release wakes the next waiter. Grants of
// contenders that did not wait have their bells taken, once the Store
// learns that others wait (an acquire or renewal sees them), by one
// holder connection (bells_hold.go). Connections that may hold a bell go
// back to the pool only after letting every bell go; on any doubt they
// are discarded, which ends their session and so frees its locks.
type bells struct {
	db  *sql.DB
	sql bellSQL
	max int // ringers at most
	hub *hub
	log *slog.Logger

	wg sync.WaitGroup // ringers and the holder loop

	mu      sync.Mutex
	closed  bool
	ringers map[bellID]*ringer
	held    map[bellID]heldGrant // grants without a ringer
	holding bool                 // the holder loop runs
	sparing bool                 // spare opens a connection
	kick    chan struct{}        // wakes the holder loop
}

// ringer is the state of one ringer goroutine, guarded by bells.mu.
type ringer struct {
	id     bellID
	next   *instr             // the instruction not yet taken
	wake   chan struct{}      // buffered: next was set
	cur    instr              // what the goroutine does now
	cancel context.CancelFunc // aborts its statement in flight, if any
	idle   *sql.Conn          // its connection while it holds our bell and waits (lendable)
	on     dbtx               // its connection as lent (bellSQL.lendable), nil without one
	lent   bool               // idle is lent to a Release: the goroutine waits
	gone   bool               // the Release let the session's bells go
}

func newBells(db *sql.DB, stmts bellSQL, max int, h *hub, log *slog.Logger) *bells {
	return &bells{db: db, sql: stmts, max: max, hub: h, log: log,
		ringers: map[bellID]*ringer{}, held: map[bellID]heldGrant{}, kick: make(chan struct{}, 1)}
}

// start, stop and close make bells a pushBackend; start and stop run under
// the hub's mu.
func (b *bells) start() {}

// stop ends the ringers of waiters and the parked ones (nobody watches
// any more); ringers that hold a grant's bell keep it until the grant
// ends.
func (b *bells) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.ringers {
		if r.cur.op == opWait || r.cur.op == opPark {
			b.send(r, instr{op: opStop})
		}
	}
}

// close lets every bell go and waits until every goroutine has ended.
func (b *bells) close() {
	b.mu.Lock()
	b.closed = true
	for _, r := range b.ringers {
		b.send(r, instr{op: opStop})
	}
	clear(b.held)
	if b.holding {
		b.wakeHolder()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// limit is how many ringers may run: the configured bound, and with the
// holder's connection no more than half of the pool.
func (b *bells) limit() int {
	if n := b.db.Stats().MaxOpenConnections; n > 0 {
		return min(b.max, n/2-1)
	}
	return b.max
}

// admit reports whether id may have a ringer.
func (b *bells) admit(id bellID) bool {
	if b.hub.usable() != nil { // hub.mu before b.mu
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	_, ok := b.ringers[id]
	return ok || len(b.ringers) < b.limit() || b.parked() != nil
}

// parked returns a ringer that is parked and may be stopped to make room
// for another, or nil. Called with mu held.
func (b *bells) parked() *ringer {
	for _, r := range b.ringers {
		if r.cur.op == opPark && r.next == nil {
			return r
		}
	}
	return nil
}

// instruct tells id's ringer what to do next, starting one if needed.
func (b *bells) instruct(id bellID, in instr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ringers[id]
	if r == nil {
		if in.op == opStop || in.op == opPark || b.closed {
			return
		}
		if len(b.ringers) >= b.limit() {
			p := b.parked()
			if p == nil {
				return
			}
			// A parked ringer makes room: it ends, its connection goes
			// back to the pool.
			delete(b.ringers, p.id)
			b.send(p, instr{op: opStop})
		}
		r = &ringer{id: id, wake: make(chan struct{}, 1), cur: instr{op: -1}}
		b.ringers[id] = r
		b.wg.Add(1)
		go b.ring(r)
	}
	b.send(r, in)
}

// send hands in to r, aborting the statement r is blocked in when that
// statement no longer serves. Called with mu held.
func (b *bells) send(r *ringer, in instr) {
	if r.next == nil && r.cur == in {
		return // already doing it
	}
	r.next = &in
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if r.cancel != nil && r.cur.op == opWait {
		r.cancel()
	}
}

// take returns r's next instruction, waiting at most d (0: not at all);
// ok is false when none came.
func (b *bells) take(r *ringer, d time.Duration) (in instr, ok bool) {
	var t <-chan time.Time
	if d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		t = timer.C
	}
	for timedOut := false; ; {
		b.mu.Lock()
		if !r.lent && r.next != nil {
			in, r.next = *r.next, nil
			r.cur, r.cancel = in, nil
			b.mu.Unlock()
			return in, true
		}
		lent := r.lent
		b.mu.Unlock()
		if !lent && (d == 0 || timedOut) {
			return instr{}, false
		}
		select {
		case <-r.wake:
		case <-t:
			timedOut, t = true, nil
		}
	}
}

// lend hands a Release of id the connection of id's ringer when it holds
// id's bell and waits, so that the release statement lets the bell go
// itself (ReleaseBells); nil when there is none. The ringer waits until
// giveBack.
func (b *bells) lend(name, key string) dbtx {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ringers[bellID{name, key}]
	if r == nil || r.idle == nil || r.lent || r.next != nil {
		return nil
	}
	r.lent = true
	return r.on
}

// giveBack returns the connection lend handed out; letGo tells whether the
// release statement let the session's bells go.
func (b *bells) giveBack(name, key string, letGo bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ringers[bellID{name, key}]
	if r == nil || !r.lent {
		return
	}
	r.lent = false
	r.gone = r.gone || letGo
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// grant records that id holds its lock for at most remaining more: its
// ringer (it waited) keeps its bell; otherwise, once others are known to
// wait (waited), the holder loop takes it. An uncontended grant does no
// doorbell work: a waiter that comes later probes the row until the
// holder learns of it (its next renewal) and takes its bell.
func (b *bells) grant(id bellID, remaining time.Duration, waited bool) {
	if b.hub.usable() != nil { // the pool has no connection to lend (hub.mu before b.mu)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	now := time.Now()
	if r := b.ringers[id]; r != nil {
		if r.cur.op == opPark && r.next == nil && !waited {
			return // nobody waits: the grant needs no bell, the ringer stays parked
		}
		b.send(r, instr{op: opHold, until: now.Add(remaining)})
		return
	}
	g, ok := b.held[id]
	if !ok && !waited {
		return
	}
	g.until = now.Add(remaining)
	b.held[id] = g
	b.wakeHolder()
}

// end records that id's grant ended or that id left the queue. Its ringer
// parks: it lets its bells go but keeps its connection (and the statements
// prepared on it) for id's next wait, which a contender that loops on a
// lock soon has.
func (b *bells) end(id bellID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.ringers[id]; r != nil {
		b.send(r, instr{op: opPark})
	}
	if _, ok := b.held[id]; ok {
		delete(b.held, id)
		b.wakeHolder()
	}
}

// ring is a ringer goroutine: it follows its instructions until told to
// stop (or until nobody follows up on a ring or on a park), then lets its
// bells go and hands its connection back.
func (b *bells) ring(r *ringer) {
	defer b.wg.Done()
	var conn *sql.Conn
	for {
		var holds, park bool
		conn, holds, park = b.serve(r, conn)
		if conn != nil && holds && !b.letGo(r, conn) {
			conn = nil
		}
		// An instruction that came while the ringer was ending starts it
		// again (on the same, clean connection), or it would be lost; a
		// parked ringer with a clean connection waits for one.
		b.mu.Lock()
		if b.closed || b.ringers[r.id] != r || r.next == nil && (!park || conn == nil) {
			if b.ringers[r.id] == r {
				delete(b.ringers, r.id)
			}
			b.mu.Unlock()
			if conn != nil {
				b.hangUp(r, conn, false)
			}
			return
		}
		b.mu.Unlock()
	}
}

// adopt makes conn r's connection, lendable as bellSQL.lendable has it.
func (b *bells) adopt(r *ringer, conn *sql.Conn) {
	on := b.sql.lendable(conn)
	b.mu.Lock()
	r.on = on
	b.mu.Unlock()
}

// hangUp hands r's connection back: closes what was prepared on it, then
// the connection, discarding its session when bad.
func (b *bells) hangUp(r *ringer, conn *sql.Conn, bad bool) {
	b.mu.Lock()
	on := r.on
	r.on = nil
	b.mu.Unlock()
	if p, ok := on.(*prepared); ok {
		p.close()
	}
	if bad {
		discard(conn)
	} else {
		conn.Close()
	}
}

// serve follows r's instructions on conn (a new one when nil) until told
// to stop or park, or until nobody follows up on a ring, and returns the
// connection, if any, whether its session may hold bells, and whether the
// ringer was told to park.
func (b *bells) serve(r *ringer, conn *sql.Conn) (_ *sql.Conn, dirty, park bool) {
	mine := false // conn's session holds our bell
	in, ok := b.take(r, rangWait)
	for fails, probes := 0, 0; ok; {
		if in.op == opStop || in.op == opPark {
			return conn, dirty, in.op == opPark
		}
		if conn == nil {
			if conn = b.connect(); conn == nil {
				return nil, false, false
			}
			b.adopt(r, conn)
			mine = false
		}
		if in.op == opHold {
			if !mine { // came to hold without waiting first
				dirty = true
				taken, err := b.sql.take(context.Background(), conn, r.id)
				if err != nil {
					b.hangUp(r, conn, true)
					return nil, dirty, false
				}
				mine = taken
			}
			// Keep the bell until the grant ends, is renewed, or lapses.
			if mine {
				if p, ok := r.on.(*prepared); ok { // before it is lent: its release must not wait for a prepare
					ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
					p.warm(ctx)
					cancel()
				}
				b.mu.Lock()
				r.idle = conn
				b.mu.Unlock()
			}
			in, ok = b.take(r, max(time.Until(in.until), 0)+time.Millisecond)
			b.mu.Lock()
			r.idle = nil
			if r.gone { // a Release let the bells go on our connection
				r.gone, mine, dirty = false, false, false
			}
			b.mu.Unlock()
			if !ok {
				return conn, dirty, false // lapsed without a word: nobody holds it any more
			}
			continue
		}
		// opWait: hold our bell, wait behind pred's.
		ctx, cancel := context.WithCancel(context.Background())
		b.mu.Lock()
		stale := r.next != nil
		r.cancel = cancel
		b.mu.Unlock()
		var held bool
		var rang int64
		var err error
		if !stale {
			dirty = true
			held, rang, err = b.sql.wait(ctx, conn, r.id, in.pred, mine)
		}
		cancel()
		b.mu.Lock()
		r.cancel = nil
		r.cur = instr{op: -1} // any instruction is news from now on
		b.mu.Unlock()
		if err != nil {
			b.hangUp(r, conn, true) // aborted or failed: its session may hold anything
			conn = nil
		}
		if next, got := b.take(r, 0); got { // a new instruction came meanwhile
			in = next
			continue
		}
		switch {
		case err != nil:
			b.log.Warn("sqlstore: doorbell connection failed; reconnecting", "lock", r.id.mutex, "error", err)
			if !sleepCtx(context.Background(), reconnectBackoff(fails)) {
				return conn, dirty, false
			}
			fails++
		case rang == 0: // timed out: wait again
			in.op = opWait
			continue
		case rang == 1: // pred let go: a release, or pred left
			fails, probes = 0, 0
			mine = held
		default: // nobody holds pred's bell: try the row now and then
			fails = 0
			mine = held
			if next, got := b.take(r, probeBackoff(probes)); got {
				in = next
				continue
			}
			probes++
		}
		b.hub.wakeKey(r.id.mutex, r.id.key)
		in, ok = b.take(r, rangWait) // nobody follows up: give the bells up
	}
	return conn, dirty, false
}

// probeBackoff is the pause before the n-th (from 0) try of the row by a
// waiter whose predecessor holds no bell (a holder that took the lock
// without waiting takes its bell only once it learns of waiters): 10 ms
// doubling to 1 s.
func probeBackoff(n int) time.Duration {
	return backoff.Exp(10*time.Millisecond, time.Second, n)
}

// connect borrows a connection for a ringer, or nil when none comes.
func (b *bells) connect() *sql.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
	defer cancel()
	conn, err := b.db.Conn(ctx)
	if err != nil {
		b.log.Warn("sqlstore: no connection for a doorbell; the waiter polls", "error", err)
		return nil
	}
	b.spare()
	return conn
}

// spare opens a connection for the pool, in the background, when taking
// one for a ringer left it none idle: the contender's acquire once its
// bell rings would otherwise open one (a new server session, about a
// millisecond or more) between the release and the grant. A waiter waits
// anyway; the hand-off should not. Only while the pool has room, and one
// at a time.
func (b *bells) spare() {
	st := b.db.Stats()
	if st.Idle > 0 || st.MaxOpenConnections > 0 && st.OpenConnections >= st.MaxOpenConnections {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.sparing {
		return
	}
	b.sparing = true
	b.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
		defer cancel()
		if conn, err := b.db.Conn(ctx); err == nil {
			conn.Close() // idle in the pool from now on
		}
		b.mu.Lock()
		b.sparing = false
		b.mu.Unlock()
	})
}

// letGo lets every bell of r's connection's session go, or discards conn
// (ending its session frees them too) and reports false.
func (b *bells) letGo(r *ringer, conn *sql.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
	defer cancel()
	if err := b.sql.dropAll(ctx, conn); err != nil {
		b.hangUp(r, conn, true)
		return false
	}
	return true
}

// discard makes database/sql close conn's connection instead of pooling
// it, which ends the session and frees every named lock it holds.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}
