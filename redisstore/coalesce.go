package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxCoalesced bounds the calls one coalesced pipeline carries, so that no
// pipeline holds Redis for much more than a millisecond.
const maxCoalesced = 128

// maxInFlight is how many calls or pipelines a coalescer has in flight at
// once: one. Two (Redis running one while the client reads the other's
// replies) measured worse: 0.108 round trips per cycle instead of 0.064,
// and more CPU per cycle on both sides (BenchmarkManyKeys).
const maxInFlight = 1

// A coalescer sends the script calls (EVALSHA) that many goroutines make on
// one server at once in pipelines: while one pipeline is in flight, the
// calls that arrive meanwhile collect, and go together as the next one, one
// round trip (and one read and one write on each side) for all of them. An
// idle coalescer adds nothing: a call that finds nothing in flight is sent
// at once, in the caller's goroutine. Each call keeps its own reply and
// error, and a caller whose context ends while its call waits in the queue
// returns at once, its call never sent.
type coalescer struct {
	c *redis.Client

	mu    sync.Mutex
	busy  int        // calls or pipelines in flight, at most maxInFlight
	queue []*pending // calls waiting for the next pipeline
}

// pending is one queued call.
type pending struct {
	ctx   context.Context
	cmd   *redis.Cmd
	done  chan struct{} // closed once cmd has its reply or error
	taken bool          // under mu: in a pipeline (or dropped: ctx ended)
}

// do runs cmd on q's server and returns its error; cmd holds the reply.
// It returns ctx's error when ctx ends first, whether or not the call was
// sent (then its outcome is unknown, as with any call whose context ends).
func (q *coalescer) do(ctx context.Context, cmd *redis.Cmd) error {
	q.mu.Lock()
	if q.busy < maxInFlight {
		q.busy++
		q.mu.Unlock()
		err := q.c.Process(ctx, cmd)
		q.next()
		return err
	}
	p := &pending{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	q.queue = append(q.queue, p)
	q.mu.Unlock()
	select {
	case <-p.done:
		return cmd.Err()
	case <-ctx.Done():
	}
	q.mu.Lock()
	if !p.taken {
		for i, o := range q.queue {
			if o == p {
				q.queue = append(q.queue[:i], q.queue[i+1:]...)
				break
			}
		}
		p.taken = true // never sent
	}
	q.mu.Unlock()
	return ctx.Err()
}

// next is called when a call or pipeline is answered: it hands what
// collected meanwhile to a flushing goroutine, or marks q idle.
func (q *coalescer) next() {
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.busy--
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	go q.flush()
}

// flush sends the queue in pipelines, one at a time, until it is empty.
func (q *coalescer) flush() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.busy--
			q.mu.Unlock()
			return
		}
		batch := q.queue
		if len(batch) > maxCoalesced {
			batch = batch[:maxCoalesced:maxCoalesced]
			q.queue = q.queue[maxCoalesced:]
		} else {
			q.queue = nil
		}
		live := make([]*pending, 0, len(batch))
		for _, p := range batch {
			p.taken = true
			if p.ctx.Err() == nil { // a call whose caller left is not sent
				live = append(live, p)
			}
		}
		q.mu.Unlock()
		q.send(live)
	}
}

// send runs the calls of batch in one pipeline and wakes their callers.
// The pipeline runs until the last of the callers' deadlines (no deadline
// when a caller has none: the client's read and write timeouts bound it).
func (q *coalescer) send(batch []*pending) {
	if len(batch) == 0 {
		return
	}
	ctx := context.Background()
	var last time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			last = time.Time{}
			break
		}
		if d.After(last) {
			last = d
		}
	}
	if !last.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, last)
		defer cancel()
	}
	if len(batch) == 1 {
		_ = q.c.Process(ctx, batch[0].cmd)
	} else {
		_, _ = q.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for _, p := range batch {
				_ = pl.Process(ctx, p.cmd)
			}
			return nil
		})
	}
	for _, p := range batch {
		close(p.done)
	}
}
