package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"log/slog"
	"sync"
	"time"

	mydb "github.com/simba-go/simba/internal/db/mysql"
)

// grantHooks tell a dialect's push path what the Store's own calls
// learned. None of them blocks.
type grantHooks interface {
	// granted: this Store holds mutex for at most remaining more.
	granted(mutex string, remaining time.Duration)
	// ended: this Store's grant of mutex ended (released or not held).
	ended(mutex string)
	// lost: an acquire of mutex by this Store found another owner.
	lost(mutex string)
}

// noHooks is the grantHooks of a dialect that needs none.
type noHooks struct{}

func (noHooks) granted(string, time.Duration) {}
func (noHooks) ended(string)                  {}
func (noHooks) lost(string)                   {}

// doorbells is the MySQL push path (queries/mysql/doorbell.sql). While this
// Store holds grants, one connection of its own holds their doorbells (the
// holder loop); after an acquire of a watched mutex loses, a waiter loop
// blocks in GET_LOCK on that mutex's doorbell on a connection of its own and
// tells the hub when the lock frees, then returns the connection: the next
// lost acquire arms it again. Connections that may hold a doorbell go back
// to the pool only after releasing it; on any doubt they are discarded,
// which ends their session and so frees its locks.
type doorbells struct {
	db    *sql.DB
	q     mydb.Queries
	scope string // the table name
	max   int    // waiter loops at most
	hub   *hub
	log   *slog.Logger

	wg sync.WaitGroup // the holder and waiter loops

	mu      sync.Mutex
	closed  bool                          // Close was called
	on      bool                          // the hub has subscribers
	held    map[string]time.Time          // grants this Store holds → when they lapse at the latest
	holding bool                          // the holder loop runs
	kick    chan struct{}                 // wakes the holder loop
	waiting map[string]context.CancelFunc // mutexes with a waiter loop
	free    map[string]*freeRings         // rate limit of rings on a free doorbell
}

func newDoorbells(db *sql.DB, table string, max int, h *hub, log *slog.Logger) *doorbells {
	return &doorbells{
		db: db, scope: table, max: max, hub: h, log: log,
		held:    map[string]time.Time{},
		kick:    make(chan struct{}, 1),
		waiting: map[string]context.CancelFunc{},
		free:    map[string]*freeRings{},
	}
}

// start and stop run under the hub's mu (pushBackend).
func (b *doorbells) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.on = true
}

func (b *doorbells) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.on = false
	for m, cancel := range b.waiting {
		cancel()
		delete(b.waiting, m)
	}
	clear(b.free)
}

func (b *doorbells) granted(mutex string, remaining time.Duration) {
	if b.hub.usable() != nil { // the pool has no connection to lend (hub.mu before b.mu)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.held[mutex] = time.Now().Add(remaining)
	if cancel, ok := b.waiting[mutex]; ok { // no need to wait for ourselves
		cancel()
		delete(b.waiting, mutex)
	}
	b.wakeHolder()
}

func (b *doorbells) ended(mutex string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[mutex]; ok {
		delete(b.held, mutex)
		b.wakeHolder()
	}
}

func (b *doorbells) lost(mutex string) {
	if !b.hub.watched(mutex) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || !b.on || b.waiting[mutex] != nil || len(b.waiting) >= b.waiterLimit() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.waiting[mutex] = cancel
	b.wg.Add(1)
	go b.wait(ctx, mutex)
}

// waiterLimit is how many waiter loops may run: the configured bound, and
// with the holder's connection no more than half of the pool.
func (b *doorbells) waiterLimit() int {
	if n := b.db.Stats().MaxOpenConnections; n > 0 {
		return min(b.max, n/2-1)
	}
	return b.max
}

// close drops every doorbell this Store holds, stops the waiter loops and
// waits until every loop has ended.
func (b *doorbells) close() {
	b.mu.Lock()
	b.closed = true
	clear(b.held)
	if b.holding {
		b.wakeHolder()
	}
	for m, cancel := range b.waiting {
		cancel()
		delete(b.waiting, m)
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// wakeHolder starts the holder loop or wakes it. Called with mu held.
func (b *doorbells) wakeHolder() {
	if !b.holding {
		b.holding = true
		b.wg.Add(1)
		go b.hold()
		return
	}
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// wait is a waiter loop: it rings the hub once the doorbell of mutex frees
// (a release), or when it finds the doorbell free and may ring (the
// holder's session has not taken it yet, or the release came before this
// loop), then returns. A failed connection is replaced, with backoff.
func (b *doorbells) wait(ctx context.Context, mutex string) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		if cancel := b.waiting[mutex]; cancel != nil && ctx.Err() == nil { // still ours
			cancel()
			delete(b.waiting, mutex)
		}
		b.mu.Unlock()
	}()
	for n := 0; ; n++ {
		if b.ring(ctx, mutex) || !sleepCtx(ctx, backoff(n)) {
			return
		}
		b.log.Warn("sqlstore: doorbell connection failed; reconnecting", "mutex", mutex)
	}
}

// ring waits on one connection until the doorbell of mutex rings (true)
// or the connection fails (false, unless ctx ended).
func (b *doorbells) ring(ctx context.Context, mutex string) bool {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return ctx.Err() != nil
	}
	defer conn.Close()
	args := mydb.TakeDoorbellParams{Scope: b.scope, Mutex: []byte(mutex)}
	for ctx.Err() == nil {
		args.TimeoutMs = 0 // is anyone holding it?
		taken, err := b.q.TakeDoorbell(ctx, conn, args)
		if err != nil || (taken == 1 && !b.drop(ctx, conn, mutex)) {
			discard(conn)
			return ctx.Err() != nil
		}
		if taken == 1 { // free: a release came first, or no one rings
			if wait := b.freeRing(mutex); wait > 0 {
				if !sleepCtx(ctx, wait) {
					return true
				}
				continue
			}
			b.hub.notify(mutex)
			return true
		}
		args.TimeoutMs = int64(time.Hour / time.Millisecond) // MariaDB refuses -1
		taken, err = b.q.TakeDoorbell(ctx, conn, args)
		if err != nil || (taken == 1 && !b.drop(ctx, conn, mutex)) {
			discard(conn)
			return ctx.Err() != nil
		}
		if taken == 1 { // the holder let go
			b.rang(mutex)
			b.hub.notify(mutex)
			return true
		}
	}
	return true
}

// drop releases the doorbell of mutex held by conn's session.
func (b *doorbells) drop(ctx context.Context, conn *sql.Conn, mutex string) bool {
	n, err := b.q.DropDoorbell(ctx, conn, mydb.DropDoorbellParams{Scope: b.scope, Mutex: []byte(mutex)})
	return err == nil && n == 1
}

// freeRings limits the rings of a waiter that finds a doorbell free, so
// that a holder without a doorbell cannot make its waiters spin: the first
// such ring is at once, each next one waits twice as long (from 50 ms to
// 2 s) until a real ring resets it.
type freeRings struct {
	last time.Time
	gap  time.Duration
}

// freeRing returns 0 when a ring is allowed now (and counts it), else how
// long to wait before the next probe.
func (b *doorbells) freeRing(mutex string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.free[mutex]
	if f == nil {
		f = &freeRings{}
		b.free[mutex] = f
	}
	now := time.Now()
	if wait := f.last.Add(f.gap).Sub(now); wait > 0 {
		return wait
	}
	f.last = now
	f.gap = min(max(2*f.gap, 50*time.Millisecond), 2*time.Second)
	return 0
}

// rang resets the free-ring limit of mutex after a real ring.
func (b *doorbells) rang(mutex string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.free, mutex)
}

// discard makes database/sql close conn's connection instead of pooling
// it, which ends the session and frees every named lock it holds.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}
