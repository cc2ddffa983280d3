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
	// key; "" when the lock has no owner); g is the grant the acquire
	// asked for.
	waiting(mutex, key, pred string, g grantReq)
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
func (noHooks) waiting(string, string, string, grantReq)    {}
func (noHooks) granted(string, string, time.Duration, bool) {}
func (noHooks) ended(string, string)                        {}
func (b *bells) canWait(name, key string) bool              { return b.admit(bellID{name, key}) }
func (b *bells) waiting(name, key, pred string, g grantReq) {
	if !b.sql.grants() {
		g = grantReq{}
	}
	b.instruct(bellID{name, key}, instr{op: opWait, pred: pred, g: g})
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
	g     grantReq  // opWait: the grant to ask for when the bell rings (none when g.owner is empty)
	until time.Time // opHold: when the grant lapses unless renewed
}

// pusher is what a push path adds to grantHooks when its waits can grant
// (bellSQL.grants): the grant a contender's wait made, for its next
// acquire to take without a statement.
type pusher interface {
	takePush(id bellID, owner string) (pushed, bool)
}

// row is p as the acquire of owner with ttlMs and transitionMs at now
// reports it: the grant's time left, counted from the wait's send (the
// server's expiries run from the statement's start, which came later),
// so that a deadline taken before the acquire is never later than the
// server's. ok is false when the acquire asks for other durations, or
// when half the ttl or more has passed since the send (a long wait): the
// acquire then runs its statements, which extend the grant.
func (p pushed) row(ttlMs, transitionMs int64, now time.Time) (r row, ok bool) {
	if p.g.ttlMs != ttlMs || p.g.transitionMs != transitionMs {
		return row{}, false
	}
	elapsed := ceilMs(now.Sub(p.sent))
	if elapsed < 0 || 2*elapsed >= ttlMs {
		return row{}, false
	}
	return row{found: true, owner: p.g.owner, token: p.token, ttlAt: ttlMs - elapsed,
		transitionAt: ttlMs + transitionMs - elapsed, crowd: true}, true
}

// grantReq is the grant a waiter's acquire asked for: its owner and
// durations.
type grantReq struct {
	owner               string
	ttlMs, transitionMs int64
	windowMs            int64 // the Store's hand-off window, for a release of the grant nobody took
}

// pushed is a grant that a ringer's wait made (bellSQL.wait with a
// grantReq) and that the contender's next acquire takes (bells.takePush):
// its token, and the ringer's time before it sent the wait, from which the
// grant's expiries run at the latest.
type pushed struct {
	token int64
	g     grantReq
	sent  time.Time
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
	push   *pushed            // a grant its wait made that no acquire took yet

	// Its goroutine's own: the server's id of the session of connection
	// sessOf, which interrupts a wait that grants (bellSQL.session).
	sess   int64
	sessOf *sql.Conn
	warmOn *sql.Conn // the connection bellSQL.warm readied
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
	usable := b.hub.usable() == nil // the pool has a connection to lend (hub.mu before b.mu)
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ringers[id]
	if r != nil {
		// The contender holds the lock: a grant our wait made is this
		// one, and no longer ours to drop.
		r.push = nil
	}
	if !usable || b.closed {
		return
	}
	now := time.Now()
	if r != nil {
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
			b.dropPush(r, conn)
			return conn, dirty, in.op == opPark
		}
		if conn == nil {
			if conn = b.connect(); conn == nil {
				b.dropPush(r, nil)
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
				if r.warmOn != conn { // before it is lent: its release must not wait for a prepare
					ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
					b.sql.warm(ctx, r.on, r.id)
					cancel()
					r.warmOn = conn
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
		// opWait: hold our bell, wait behind pred's (and, where the
		// dialect can, take the lock in the same statement when it rings).
		// While a grant our last wait took is not yet taken (an
		// instruction from an earlier loss came after it), there is
		// nothing to wait for: the contender is told again.
		b.mu.Lock()
		has := r.push != nil
		b.mu.Unlock()
		if has {
			b.hub.wakeKey(r.id.mutex, r.id.key)
			in, ok = b.take(r, rangWait)
			continue
		}
		g := in.g
		if g.owner != "" && r.sessOf != conn {
			ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
			id, err := b.sql.session(ctx, conn)
			cancel()
			if err != nil {
				b.hangUp(r, conn, true)
				conn = nil
				continue // reconnect
			}
			r.sess, r.sessOf = id, conn
		}
		sess := r.sess
		var (
			ctx, cancel = context.WithCancel(context.Background())
			stop        = cancel // what send calls to end the wait
			waited      = make(chan struct{})
			killer      sync.WaitGroup
		)
		if g.owner != "" {
			// A wait that grants is never cancelled from here: the driver
			// would close the connection, and whether the lock went to us
			// would be unknown. It is interrupted on the server instead,
			// which always replies; its context is the last resort.
			var once sync.Once
			stop = func() {
				once.Do(func() {
					killer.Add(1)
					go func() {
						defer killer.Done()
						b.interrupt(sess, waited, cancel)
					}()
				})
			}
		}
		b.mu.Lock()
		stale := r.next != nil
		r.cancel = stop
		b.mu.Unlock()
		var held bool
		var rang, token int64
		var err error
		if !stale {
			dirty = true
			sent := time.Now()
			held, rang, token, err = b.sql.wait(ctx, conn, r.id, in.pred, mine, g)
			if token > 0 {
				b.mu.Lock()
				r.push = &pushed{token: token, g: g, sent: sent}
				b.mu.Unlock()
				b.hub.wakeKey(r.id.mutex, r.id.key) // at once, whatever instruction came meanwhile
			}
		}
		close(waited)
		b.mu.Lock()
		r.cancel = nil        // no interruption starts from now on
		r.cur = instr{op: -1} // any instruction is news from now on
		b.mu.Unlock()
		killer.Wait() // and none is still on its way to the session
		cancel()
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
		case rang == 1 || token > 0: // pred let go (a release, or pred left), or the lock is ours
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
		if token == 0 { // a grant woke the contender already
			b.hub.wakeKey(r.id.mutex, r.id.key)
		}
		in, ok = b.take(r, rangWait) // nobody follows up: give the bells up
	}
	b.dropPush(r, conn) // nobody came for it either
	return conn, dirty, false
}

// interrupt ends the wait of session (a ringer's wait that grants) from
// a connection of the pool, again every 10 ms until the wait returns
// (waited closes): an interruption that reaches the server before the
// statement does ends nothing. After a second without success it cancels
// the wait's context, which closes its connection.
func (b *bells) interrupt(session int64, waited <-chan struct{}, cancel context.CancelFunc) {
	for start := time.Now(); time.Since(start) < time.Second; {
		ctx, c := context.WithTimeout(context.Background(), holdCallMax)
		err := b.sql.interrupt(ctx, b.db, session)
		c()
		if err != nil {
			break
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-waited:
			t.Stop()
			return
		case <-t.C:
		}
	}
	cancel()
}

// takePush returns the grant a wait of id's ringer made for owner, if
// no acquire took it yet, and forgets it.
func (b *bells) takePush(id bellID, owner string) (pushed, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ringers[id]
	if r == nil || r.push == nil || r.push.g.owner != owner {
		return pushed{}, false
	}
	p := *r.push
	r.push = nil
	return p, true
}

// dropPush ends, on conn (the pool's when nil), the grant a wait of r
// made that no acquire took: r's contender left (or the Store closes)
// before it took it.
func (b *bells) dropPush(r *ringer, conn *sql.Conn) {
	b.mu.Lock()
	p := r.push
	r.push = nil
	b.mu.Unlock()
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
	defer cancel()
	var on dbtx = b.db
	if conn != nil {
		on = conn
	}
	if err := b.sql.release(ctx, on, r.id, p.g.owner, p.token, p.g.windowMs); err != nil {
		b.log.Warn("sqlstore: could not release a grant nobody took; it lapses by itself", "lock", r.id.mutex, "error", err)
	}
}

// probeBackoff is the pause before the n-th (from 0) try of the row by a
// waiter whose predecessor holds no bell (a holder that took the lock
// without waiting takes its bell only once it learns of waiters): 1 ms
// doubling to 1 s, so that the first hand-off from such a holder comes at
// most about twice its hold after the release (each try is the ringer's
// WaitGrant, which takes the lock when it is the waiter's, and then the
// contender's own acquire).
func probeBackoff(n int) time.Duration {
	return backoff.Exp(time.Millisecond, time.Second, n)
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
