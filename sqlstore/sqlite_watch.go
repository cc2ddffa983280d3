package sqlstore

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"

	litedb "github.com/simba-go/simba/internal/db/sqlite"
)

// litePollEvery is how often the SQLite push path asks whether another
// connection committed: a local read of a counter, no server involved.
const litePollEvery = 20 * time.Millisecond

// poller is the SQLite push path. SQLite has no NOTIFY, but every process
// sharing the file shares the disk: while anyone watches, one connection
// of the pool reads PRAGMA data_version (which changes when another
// connection commits) every litePollEvery, and on a change reads the
// watched mutexes and wakes the subscribers of those whose owner or token
// changed, or that it finds free on first sight. Its start and stop run
// under the hub's mu.
type poller struct {
	db    *sql.DB
	table string
	hub   *hub
	log   *slog.Logger

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
		if !sleepCtx(ctx, backoff(n)) {
			return
		}
	}
}

// owned is what a subscriber is woken for a change of.
type owned struct {
	owner string
	token int64
}

// session polls on one connection until ctx ends or a read fails.
func (p *poller) session(ctx context.Context) error {
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	eng := liteEngine{db: rewrite(conn, p.table, litedb.Get)}
	seen := map[string]owned{}
	last := int64(-1)
	p.hub.recheck() // commits before this session were not seen
	tick := time.NewTicker(litePollEvery)
	defer tick.Stop()
	for {
		var v int64
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			return err
		}
		if v != last {
			last = v
			watched := p.hub.mutexes()
			for _, m := range watched {
				r, err := eng.get(ctx, m)
				if err != nil {
					return err
				}
				now := owned{r.record().Owner, r.token}
				old, known := seen[m]
				seen[m] = now
				if known && old != now || !known && now.owner == "" {
					p.hub.notify(m)
				}
			}
			if len(seen) > len(watched) {
				keep := make(map[string]owned, len(watched))
				for _, m := range watched {
					keep[m] = seen[m]
				}
				seen = keep
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
