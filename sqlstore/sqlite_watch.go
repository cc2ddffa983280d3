package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	litedb "github.com/simba-go/simba/internal/db/sqlite"
)

// litePollEvery is how often the SQLite push path asks whether another
// connection committed: a local read of a counter, no server involved.
// litePollFast is how often it asks while a waiter of this Store is first
// or second in a queue: the next hand-off is for it. A waiter further
// back, at position n (from 0), asks every n × litePollFast (at most
// litePollEvery): its turn comes after n hand-offs at least, so it is
// fast by the time it is second.
const (
	litePollEvery = 20 * time.Millisecond
	litePollFast  = time.Millisecond
)

// after is the poll interval of a Store whose nearest waiter is at
// position pos of its queue (-1: none of its waiters is queued).
func (p *poller) after(pos int) time.Duration {
	every := cmp.Or(p.every, litePollEvery)
	if pos < 0 {
		return every
	}
	return min(time.Duration(max(pos, 1))*litePollFast, every)
}

// poller is the SQLite push path. SQLite has no NOTIFY, but every process
// sharing the file shares the disk: while anyone watches, one connection
// of the pool reads PRAGMA data_version (which changes when another
// connection commits) every litePollEvery, or litePollFast while one of
// its waiters is next in line, and on a change reads the watched locks.
// A lock a release reserved for its first waiter wakes that waiter (and
// the second one when the window ends, see hub.handoff); a lock found
// free and not reserved wakes every waiter. Its start and stop run under
// the hub's mu. As the Store's grantHooks it hears when a waiter of its
// own queued, and then looks at once: the waiter may be next, and the
// release it waits for may come within a millisecond.
type poller struct {
	noHooks
	db    *sql.DB
	table string
	hub   *hub
	log   *slog.Logger
	clock func() time.Duration // WithSQLiteClockOffset, or nil

	cancel context.CancelFunc // of the running loop; nil when stopped
	wg     sync.WaitGroup
	queued chan struct{} // a waiter of this Store queued (buffered, 1)

	every time.Duration // the longest interval; 0: litePollEvery (tests set it before the first Watch)
	polls atomic.Int64  // reads of data_version, for tests
}

// waiting tells the running session that a waiter of this Store joined a
// queue (grantHooks).
func (p *poller) waiting(string, string, string, grantReq) {
	select {
	case p.queued <- struct{}{}:
	default:
	}
}

func (p *poller) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go p.run(ctx)
}

func (p *poller) stop() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

func (p *poller) close() { p.wg.Wait() }

func (p *poller) run(ctx context.Context) {
	defer p.wg.Done()
	for n := 0; ctx.Err() == nil; n++ {
		err := p.session(ctx)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("sqlstore: SQLite change poll failed; retrying", "error", err)
		if !sleepCtx(ctx, reconnectBackoff(n)) {
			return
		}
	}
}

// seenRow is what the poller last saw of a lock.
type seenRow struct {
	owner        string
	token        int64
	transitionAt int64
	head         string
}

// session polls on one connection until ctx ends or a read fails.
func (p *poller) session(ctx context.Context) error {
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Both statements run hundreds of times a second while a waiter is
	// next: parsing them each time cost more CPU than all the Store's
	// other work (K = 32 contenders on one lock).
	stmts := newPrepared(conn, p.table, litedb.Get)
	defer stmts.close()
	eng := liteEngine{db: shiftClock(rewrite(stmts, p.table), p.clock)}
	version, err := conn.PrepareContext(ctx, "PRAGMA data_version")
	if err != nil {
		return err
	}
	defer version.Close()
	seen := map[string]seenRow{}
	last := int64(-1)
	pos := -1 // of the nearest waiter of this Store in its queue
	p.hub.hearing(true)
	defer p.hub.hearing(false)
	p.hub.recheck() // commits before this session were not seen
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-p.queued:
		}
		var v int64
		if err := version.QueryRowContext(ctx).Scan(&v); err != nil {
			return err
		}
		p.polls.Add(1)
		if v != last {
			last = v
			watched := p.hub.mutexes()
			pos = -1
			for _, m := range watched {
				r, err := eng.get(ctx, m)
				if err != nil {
					return err
				}
				if n := p.look(m, r, seen); n >= 0 && (pos < 0 || n < pos) {
					pos = n
				}
			}
			if len(seen) > len(watched) {
				keep := make(map[string]seenRow, len(watched))
				for _, m := range watched {
					keep[m] = seen[m]
				}
				seen = keep
			}
		}
		t.Reset(p.after(pos))
	}
}

// look wakes the subscribers of lock that its row, changed since seen,
// concerns, and returns the position in its queue of the subscriber
// nearest its head (-1 when none is queued): the poller looks the more
// often, the nearer it is.
func (p *poller) look(name string, r row, seen map[string]seenRow) (pos int) {
	now := seenRow{owner: r.owner, token: r.token, transitionAt: r.transitionAt, head: r.queue.head()}
	old, known := seen[name]
	seen[name] = now
	changed := !known || old != now
	switch reserved := r.found && r.owner == "" && r.transitionAt > r.now; {
	case reserved && changed:
		p.hub.handoff(name, r.queue.head(), r.queue.next(), msDuration(r.transitionAt-r.now))
	case r.record().OwnerID == "" && !reserved && changed:
		p.hub.notify(name) // free: anyone may take it
	}
	pos = -1
	for _, k := range p.hub.keys(name) {
		if i := r.queue.index(k); k != "" && i >= 0 && (pos < 0 || i < pos) {
			pos = i
		}
	}
	return pos
}
