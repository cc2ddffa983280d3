package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// gate is a go-redis hook that can hold the next EVALSHA sent on its own
// (not in a pipeline) until opened, so that the calls made meanwhile queue
// in the Store's coalescer; it records how many EVALSHAs each pipeline
// carried.
type gate struct {
	mu    sync.Mutex
	hold  chan struct{} // the next lone EVALSHA waits until it is closed
	held  chan struct{} // closed once that EVALSHA waits
	pipes []int
}

// arm makes the next lone EVALSHA wait until the returned open is called;
// held is closed once it waits.
func (g *gate) arm() (held <-chan struct{}, open func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.held = make(chan struct{}), make(chan struct{})
	h := g.hold
	var once sync.Once
	return g.held, func() { once.Do(func() { close(h) }) }
}

// holdOne arms g and makes a call (Get of name) that it holds; it returns
// once the call is held, with the gate's open and the call's result.
func (g *gate) holdOne(st *redisstore.Store, name string) (open func(), first <-chan error) {
	wait, open := g.arm()
	res := make(chan error, 1)
	go func() {
		_, err := st.Get(bg, name)
		res <- err
	}()
	<-wait
	return open, res
}

// largest returns the most EVALSHAs one pipeline carried so far.
func (g *gate) largest() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, p := range g.pipes {
		n = max(n, p)
	}
	return n
}

// DialHook implements redis.Hook.
func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			g.mu.Lock()
			hold, held := g.hold, g.held
			g.hold, g.held = nil, nil
			g.mu.Unlock()
			if hold != nil {
				close(held)
				<-hold
			}
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if c.Name() == "evalsha" {
				n++
			}
		}
		g.mu.Lock()
		g.pipes = append(g.pipes, n)
		g.mu.Unlock()
		return next(ctx, cmds)
	}
}

// gatedStore returns a Store on the shared server whose client has a gate.
func gatedStore(t *testing.T) (*redisstore.Store, *gate, *redis.Client, string) {
	srv := sharedRedis(t)
	c := dial(t, srv.Addr())
	g := &gate{}
	c.AddHook(g)
	// Without the restart guard, which holds new locks back on a young
	// server: the calls here must not wait for anything but the gate.
	return newStore(t, c, srv.KeyPrefix(), redisstore.WithRestartGuard(false)), g, dial(t, srv.Addr()), srv.KeyPrefix()
}

// TestCoalescedCallsKeepTheirOwnResults: the calls that arrive while one is
// in flight go together in one pipeline, and each gets its own reply or
// error (a grant, ErrNotHeld, a foreign value's ErrUnexpectedReply).
func TestCoalescedCallsKeepTheirOwnResults(t *testing.T) {
	t.Parallel()
	st, g, direct, prefix := gatedStore(t)
	held := mustHold(t, st, "co/held", "a")
	if err := direct.Set(bg, recordKeyOf(prefix, "co/foreign"), "not a record", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		open, first := g.holdOne(st, "co/first")
		const n = 8
		var wg sync.WaitGroup
		grants := make([]lease.Record, n)
		errs := make([]error, n)
		var notHeld, foreign error
		for i := range n {
			wg.Go(func() {
				grants[i], errs[i] = st.Acquire(bg, fmt.Sprintf("co/%d/%d", attempt, i), "a", ttl, tr)
			})
		}
		wg.Go(func() { notHeld = st.Release(bg, "co/held", "b", held.Token) })
		wg.Go(func() { _, foreign = st.Acquire(bg, "co/foreign", "a", ttl, tr) })
		time.Sleep(50 * time.Millisecond) // let them queue (checked below, retried)
		open()
		wg.Wait()
		if err := <-first; err != nil {
			t.Fatalf("the first call: %v", err)
		}
		for i := range n {
			if errs[i] != nil || !grants[i].Held("a") {
				t.Fatalf("acquire %d: %+v, %v; want a grant", i, grants[i], errs[i])
			}
		}
		if !errors.Is(notHeld, lease.ErrNotHeld) {
			t.Fatalf("release of another's grant: %v; want ErrNotHeld", notHeld)
		}
		if !errors.Is(foreign, redisstore.ErrUnexpectedReply) {
			t.Fatalf("acquire over a foreign value: %v; want ErrUnexpectedReply", foreign)
		}
		if g.largest() >= 2 {
			break
		}
		if attempt == 4 {
			t.Fatalf("five rounds of %d calls queued behind a held one, and no pipeline carried two of them", n+2)
		}
	}
	if got, err := st.Get(bg, "co/held"); err != nil || !got.Held("a") {
		t.Fatalf("co/held after b's release: %+v, %v; want a's grant", got, err)
	}
}

// TestCoalescedCallCancelledInQueue: a call whose context ends while it
// waits behind one in flight returns at once and is never sent.
func TestCoalescedCallCancelledInQueue(t *testing.T) {
	t.Parallel()
	st, g, _, _ := gatedStore(t)
	open, first := g.holdOne(st, "cq/first")
	defer open()
	ctx, cancel := context.WithCancel(bg)
	res := make(chan error, 1)
	go func() {
		_, err := st.Acquire(ctx, "cq/cancelled", "a", ttl, tr)
		res <- err
	}()
	time.Sleep(20 * time.Millisecond) // queued or about to be: either way it must not be sent
	start := time.Now()
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled call stayed queued behind the held one for 10 s")
	}
	t.Logf("returned %v after cancel", time.Since(start))
	open()
	if err := <-first; err != nil {
		t.Fatalf("the first call: %v", err)
	}
	// The next call goes out after the queue is drained: the cancelled
	// acquire, had it been sent, ran before it.
	if got, err := st.Get(bg, "cq/cancelled"); err != nil || got.OwnerID != "" {
		t.Fatalf("cq/cancelled after its acquire was cancelled in the queue: %+v, %v; want never granted", got, err)
	}
}

// TestCoalescedCallsOnAHangingServer: with the server silent (a black
// hole), the call in flight and those queued behind it each return by their
// own deadline, long before the client's read timeout, and the Store works
// again once the server answers.
func TestCoalescedCallsOnAHangingServer(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	p := newProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	st := newStore(t, c, srv.KeyPrefix())
	mustHold(t, st, "hang/warm", "a") // connection and script ready
	p.Blackhole()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 10)
	took := make([]time.Duration, len(errs))
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
			defer cancel()
			t0 := time.Now()
			_, errs[i] = st.Acquire(ctx, fmt.Sprintf("hang/%d", i), "a", ttl, tr)
			took[i] = time.Since(t0)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("acquire %d on a silent server succeeded", i)
		}
		if took[i] > 20*time.Second {
			t.Errorf("acquire %d with a 300 ms deadline took %v on a silent server (read timeout 1 min)", i, took[i])
		}
	}
	t.Logf("all returned after %v", time.Since(start))
	p.Heal()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if _, err := st.Acquire(ctx, "hang/after", "a", ttl, tr); err != nil {
		t.Fatalf("acquire after the server answers again: %v", err)
	}
}

// TestCoalescedAcquireDeadlineFromBeforeTheQueue: a lease granted by a call
// that waited in the queue ends no later than ttl after Acquire was called
// (its start is taken before it queues, not when the pipeline goes out).
func TestCoalescedAcquireDeadlineFromBeforeTheQueue(t *testing.T) {
	t.Parallel()
	st, g, _, _ := gatedStore(t)
	const leaseTTL = 20 * time.Second // no renewal before the check
	m, err := lease.NewManager(st, lease.WithTTL(leaseTTL), lease.WithTransition(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(bg) })
	// The deadline of a lease whose acquire did not queue: ttl less the
	// Manager's safety margin, after the call.
	t0 := time.Now()
	ref, err := m.Acquire(bg, "dl/ref")
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Deadline().Sub(t0)
	open, first := g.holdOne(st, "dl/first")
	defer open()
	res := make(chan *lease.Lease, 1)
	start := time.Now()
	go func() {
		l, err := m.Acquire(bg, "dl/queued")
		if err != nil {
			t.Error(err)
		}
		res <- l
	}()
	const queued = 500 * time.Millisecond
	time.Sleep(queued) // the acquire waits in the queue
	open()
	if err := <-first; err != nil {
		t.Fatalf("the first call: %v", err)
	}
	l := <-res
	if l == nil {
		return
	}
	t.Logf("acquired %v after the call, deadline %v after it", time.Since(start), l.Deadline().Sub(start))
	if got := l.Deadline().Sub(start); got > want+queued/2 {
		t.Fatalf("deadline %v after Acquire was called, %v after an unqueued one's: counted from when the queue was sent", got, want)
	}
	_ = l.Release(bg)
	_ = ref.Release(bg)
}
