package sqlstore

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"
)

// litePollEvery is how often the SQLite push path asks whether another
// connection committed: a local read of a counter, no server involved.
// litePollFast is how often it asks while a waiter of this Store is first
// or second in a queue: the next hand-off is for it.
const (
	litePollEvery = 20 * time.Millisecond
	litePollFast  = time.Millisecond
)

// poller is the SQLite push path. SQLite has no NOTIFY, but every process
// sharing the file shares the disk: while anyone watches, one connection
// of the pool reads PRAGMA data_version (which changes when another
// connection commits) every litePollEvery, or litePollFast while one of
// its waiters is next in line, and on a change reads the watched locks.
// A lock a release reserved for its first waiter wakes that waiter (and
// the second one when the window ends, see hub.handoff); a lock found
// free and not reserved wakes every waiter. Its start and stop run under
// the hub's mu.
type poller struct {
	db    *sql.DB
	table string
	hub   *hub
	log   *slog.Logger
	clock func() time.Duration // WithSQLiteClockOffset, or nil

	cancel context.CancelFunc // of the running loop; nil when stopped
	wg     sync.WaitGroup
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
	eng := liteEngine{db: shiftClock(rewrite(conn, p.table), p.clock)}
	seen := map[string]seenRow{}
	last := int64(-1)
	fast := false
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
		}
		var v int64
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			return err
		}
		if v != last {
			last = v
			watched := p.hub.mutexes()
			fast = false
			for _, m := range watched {
				r, err := eng.get(ctx, m)
				if err != nil {
					return err
				}
				if p.look(m, r, seen) {
					fast = true
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
		if fast {
			t.Reset(litePollFast)
		} else {
			t.Reset(litePollEvery)
		}
	}
}

// look wakes the subscribers of lock that its row, changed since seen,
// concerns, and reports whether one of them is first or second in its
// queue (the poller then looks more often).
func (p *poller) look(name string, r row, seen map[string]seenRow) (next bool) {
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
	for _, k := range p.hub.keys(name) {
		if k != "" && (k == r.queue.head() || k == r.queue.next()) {
			return true
		}
	}
	return false
}
