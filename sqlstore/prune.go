package sqlstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
)

// DefaultRetention is how long a row stays after its lock was last held
// before the Store's background pruning deletes it (see [WithRetention]).
const DefaultRetention = 24 * time.Hour

// pruneBatch is how many rows one prune statement deletes at most.
const pruneBatch = 1000

// pruneTimeout bounds one background prune.
const pruneTimeout = time.Minute

// WithRetention sets how long the row of a lock stays after the lock
// was last held (its grant released, or its transition ended) before the
// Store deletes it (default [DefaultRetention]), so that a table of
// locks named after orders or jobs stays bounded. A Store prunes in the
// background after an Acquire, at most every quarter of d (between 1 s and
// 1 h), in a goroutine that ends with the prune (and that [Store.Close]
// waits for); d = 0 turns it off (call [Store.Prune] yourself). Tokens stay
// strictly increasing for a name that comes back after its row was
// deleted: see [Store.Prune].
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: sqlstore: retention %v is negative", lease.ErrInvalidArgument, d)
		}
		c.retention = d
		return nil
	}
}

// Prune deletes the rows of locks that nobody has held for olderThan or
// longer (released, or lapsed, that long ago) and returns how many it
// deleted, in statements of at most 1,000 rows, until none is left or ctx
// ends. Before it deletes a row it raises the table's token floor (kept in
// the row whose lock is ”) to the row's token, and a new row starts
// above the floor: a name that comes back gets a token greater than every
// token it had, so fencing tokens never repeat. Live grants and the
// hand-off window of a release are never pruned.
func (s *Store) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("%w: sqlstore: prune older than %v", lease.ErrInvalidArgument, olderThan)
	}
	var total int64
	for {
		var n int64
		var full bool
		err := s.retry(ctx, func() (err error) {
			n, full, err = s.eng.prune(ctx, ceilMs(olderThan), pruneBatch)
			return err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("sqlstore: %s prune: %w", s.dialect, err)
		}
		if !full || ctx.Err() != nil {
			return total, nil
		}
	}
}

// pruner runs Store.Prune in the background every so often.
type pruner struct {
	s         *Store
	retention time.Duration
	every     time.Duration
	log       *slog.Logger

	mu      sync.Mutex
	last    time.Time // the last prune started (or the Store was made)
	running bool
	closed  bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newPruner(s *Store, retention time.Duration, log *slog.Logger) *pruner {
	return &pruner{s: s, retention: retention, every: min(max(retention/4, time.Second), time.Hour),
		log: log, last: time.Now()}
}

// tick starts a background prune when one is due.
func (p *pruner) tick() {
	if p.retention <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || p.closed || time.Since(p.last) < p.every {
		return
	}
	p.running, p.last = true, time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), pruneTimeout)
	p.cancel = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		n, err := p.s.Prune(ctx, p.retention)
		if err != nil {
			p.log.Warn("sqlstore: prune failed", "error", err)
		} else if n > 0 {
			p.log.Debug("sqlstore: pruned rows", "rows", n)
		}
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()
}

// close stops a prune in flight and waits for it.
func (p *pruner) close() {
	p.mu.Lock()
	p.closed = true
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
